"""What the classifier works on: a command's words (Arg), what it reads (Stdin), findings, and the
interface a program family sees of the analysis (Analysis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tree_sitter import Node

from tools.base import RiskClass

READ_ONLY = RiskClass.READ_ONLY
MUTATING = RiskClass.MUTATING
DESTRUCTIVE = RiskClass.DESTRUCTIVE
FORBIDDEN = RiskClass.FORBIDDEN


_MAX_NESTING = 12  # wrappers inside wrappers; deeper than this is refused, not guessed
_MAX_ALTERNATIVES = 16  # possible values of a variable the classifier follows at once
_MAX_DECODED = 1 << 20  # bytes a decoder (base64, gzip) may produce


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Arg:
    """One word of a command after quote removal and the expansions the classifier can follow."""

    text: str | None  # None: it depends on something known only at run time
    pattern: bool = False  # unquoted glob or brace pattern: the shell may turn it into other words
    node: Node | None = field(default=None, compare=False)  # where it came from, to look for downloads
    # The read-only command whose output the word is (`$(pgrep -o vllm)`), for outputs.py; text is None then.
    output_of: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class _Stdin:
    """What a command reads on standard input, as far as the classifier can tell."""

    kind: str  # "pipe", "heredoc", "herestring" or "file"
    data: bytes | None = None  # the bytes themselves, when they can be worked out
    download: bool = False  # a network download feeds the pipe
    source: str = ""  # what produces it, for reasons: "curl", "echo | base64"


@dataclass
class _Cmd:
    name: str  # as written, after quote removal: "/usr/bin/nvidia-smi"
    prog: str  # its base name: "nvidia-smi"
    args: list[Arg]
    stdin: _Stdin | None

    @property
    def texts(self) -> list[str | None]:
        return [a.text for a in self.args]


@dataclass(frozen=True)
class _Finding:
    cls: RiskClass
    rule: str
    reason: str
    via: tuple[str, ...]
    decoded: str | None
    structural: bool  # about the shape (wrapper, expansion) rather than what a command does
    reaches: str | None = None  # another host the command acts on, when an option names one


@dataclass(frozen=True)
class _Seg:
    """A piece of a word: literal text, or the value of an expansion."""

    text: str | None
    quoted: bool = False
    split: bool = False  # unquoted expansion: word splitting and globbing apply
    glob: bool = False  # unquoted literal with an unescaped glob character


_DOWNLOADERS = frozenset(
    {"curl", "wget", "fetch", "http", "https", "nc", "ncat", "netcat", "socat", "lwp-request", "lwp-download",
     "GET", "aria2c", "tftp", "ftp"}
)
_CODE_LOADING_VARIABLES = frozenset(
    {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PATH", "PYTHONPATH", "PYTHONSTARTUP", "BASH_ENV", "ENV",
     "IFS", "PS4", "PROMPT_COMMAND", "PERL5LIB", "PERL5OPT", "NODE_OPTIONS", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
     "PAGER", "EDITOR", "VISUAL", "GIT_SSH_COMMAND", "SHELLOPTS", "BASHOPTS"}
)


class Analysis(Protocol):
    """What a program family sees of the analysis of the command it judges (shell.py implements it)."""

    workload: bool  # judging a benchmark's command line, where known entry points are read-only
    depth: int  # how many wrappers and interpreters deep this command is
    network: list[bool]  # shared flag: a /dev/tcp descriptor was opened earlier in the command
    changed_dir: bool  # a `cd` ran earlier in the command
    cwd: str | None  # the working directory as far as known ("/~": the login directory), None: unknown

    def add(self, cls: RiskClass, rule: str, reason: str, *, structural: bool = False,
            decoded: str | None = None, reaches: str | None = None) -> None: ...

    def allow(self, cmd: _Cmd, label: str | None = None, check_globs: bool = True) -> None: ...

    def allow_workload(self, cmd: _Cmd, label: str) -> None: ...

    def write(self, target: Arg, how: str, rule_prefix: str) -> None: ...

    def nested(self, via: str | None = None, decoded: str | None = None) -> Analysis: ...

    def speculate(self, via: str, decoded: str | None = None) -> Analysis: ...

    def inner_words(self, args: list[Arg], via: str, stdin: _Stdin | None = None) -> None: ...

    def inner_source(self, text: str, via: str) -> None: ...

    def code_text(self, text: str, language: str, via: str) -> None: ...

    def has_downloader(self, node: Node) -> bool: ...

    def substitution_output(self, node: Node) -> str | None: ...
