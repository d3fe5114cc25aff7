"""git: read-only subcommands, and the settings and options that make git run programs or write."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import _abbreviates, _long_options, _short_options
from agent.safety.classifier.registry import _handles
from tools.base import RiskClass

_GIT_READ = frozenset({"status", "log", "diff", "show", "rev-parse", "describe", "ls-files", "ls-tree", "blame",
                       "shortlog", "version", "help", "show-ref", "grep"})
_GIT_GLOBAL_VALUES = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_GIT_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--paginate", "-p", "--bare", "--no-replace-objects", "--literal-pathspecs",
     "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-lazy-fetch",
     "--version", "--help", "-h", "--html-path", "--man-path", "--info-path"}
)
_GIT_COMMAND_KEYS = ("pager", "editor", "sshcommand", "fsmonitor", "askpass", "external", "command", "textconv",
                     "driver", "clean", "smudge", "process", "helper", "program", "difffilter", "packobjectshook",
                     "gitproxy", "cmd")


@_handles("git")
def _git(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    clean = True
    while index < len(args) and (args[index].text or "").startswith("-"):
        text = args[index].text or ""
        name = text.split("=", 1)[0]
        if text in ("-c", "--config-env") or name == "--config-env":
            setting = args[index + 1] if text in ("-c", "--config-env") and index + 1 < len(args) else Arg(text.split("=", 1)[-1])
            _git_config_override(an, cmd, setting)
            clean = False
            index += 2 if text in ("-c", "--config-env") else 1
            continue
        if name == "--exec-path" or name == "--super-prefix":
            an.add(MUTATING, f"git:{name}", f"`git {name}` changes where git finds the programs it runs")
            clean = False
        elif text in _GIT_GLOBAL_VALUES:
            index += 1
        elif name not in _GIT_GLOBAL_VALUES and name not in _GIT_GLOBAL_FLAGS:
            an.add(MUTATING, f"git:{name}", f"`git {name}` is not an option the classifier accepts as read-only")
            clean = False
        index += 1
    sub = args[index].text if index < len(args) else None
    rest = args[index + 1:]
    problem = _git_subcommand_problem(sub, rest) if index < len(args) else None
    if problem is not None:
        an.add(*problem)
    elif clean:
        an.allow(cmd, f"git {sub}" if sub else "git")


def _git_config_override(an: Analysis, cmd: _Cmd, setting: Arg) -> None:
    an.add(
        MUTATING,
        "git:-c",
        "`git -c` overrides configuration, which can name a program for git to run (pager, editor, diff tool)",
        decoded=setting.text,
    )
    if setting.text is None or "=" not in setting.text:
        return
    written, value = setting.text.split("=", 1)
    key = written.lower()
    if not value:
        return
    if key.startswith("alias."):
        code = value[1:] if value.startswith("!") else f"git {value}"
        an.inner_source(code, f"git -c {written}")
    elif key.startswith("pager.") or key.rsplit(".", 1)[-1] in _GIT_COMMAND_KEYS:
        an.inner_source(value, f"git -c {written}")


def _git_subcommand_problem(sub: str | None, rest: list[Arg]) -> tuple[RiskClass, str, str] | None:
    texts = [a.text or "" for a in rest]
    shorts = _short_options(rest)
    longs = _long_options(rest)
    operands = [t for t in texts if t and not t.startswith("-")]
    if sub in _GIT_READ:
        if any(n == "--output" or _abbreviates(n, "--output", 5) for n in longs):
            return MUTATING, "git:--output", f"`git {sub} --output` writes to a file"
        if any(n == "--ext-diff" or _abbreviates(n, "--ext-diff", 5) for n in longs):
            return MUTATING, "git:--ext-diff", f"`git {sub} --ext-diff` runs an external diff program"
        if sub == "grep" and ("O" in shorts or any(_abbreviates(n, "--open-files-in-pager", 5) for n in longs)):
            return MUTATING, "git:grep-O", "`git grep -O` runs a pager program on the results"
        return None
    if sub == "branch":
        if shorts & set("dDmMcCfu") or longs & {"--delete", "--move", "--copy", "--force", "--set-upstream-to",
                                                   "--unset-upstream", "--edit-description", "--track"}:
            cls = DESTRUCTIVE if shorts & {"D", "d"} or "--delete" in longs else MUTATING
            return cls, "git:branch", "`git branch` with these options deletes, moves or configures branches"
        if operands and not (shorts & {"l", "a", "r"} or "--list" in longs or longs & {"--contains", "--merged",
                                                                                   "--no-merged", "--points-at"}):
            return MUTATING, "git:branch", "`git branch NAME` creates a branch"
        return None
    if sub == "tag":
        if operands and not (shorts & {"l"} or "--list" in longs) or shorts & set("dafsmu") - {"l"}:
            return MUTATING, "git:tag", "`git tag` with these arguments creates or deletes tags"
        return None
    if sub == "remote":
        if not operands or operands[0] in ("show", "get-url"):
            return None
        return MUTATING, "git:remote", "`git remote` with these arguments changes remotes"
    if sub == "config":
        reads = {"--get", "--get-all", "--get-regexp", "--list", "--get-urlmatch", "--get-color", "--get-colorbool"}
        writes = {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "--edit"}
        if (operands[:1] in (["get"], ["list"]) or longs & reads or "l" in shorts) and not (longs & writes or "e" in shorts):
            return None
        return MUTATING, "git:config", "`git config` with these arguments changes configuration"
    if sub == "stash":
        if operands[:1] in (["list"], ["show"]):
            return None
        if operands[:1] in (["drop"], ["clear"]):
            return DESTRUCTIVE, "git:stash-drop", "`git stash drop/clear` discards stashed changes"
        return MUTATING, "git:stash", "`git stash` changes the working tree"
    if sub == "reflog":
        if not operands or operands[0] == "show":
            return None
        return DESTRUCTIVE, "git:reflog", "`git reflog expire/delete` discards history entries"
    if sub == "reset" and longs & {"--hard", "--merge", "--keep"}:
        return DESTRUCTIVE, "git:reset-hard", "`git reset --hard` discards uncommitted changes"
    if sub == "clean" and ("f" in shorts or "--force" in longs):
        return DESTRUCTIVE, "git:clean", "`git clean -f` deletes untracked files"
    if sub in ("checkout", "switch") and ("f" in shorts or "--force" in longs or "--" in texts):
        return DESTRUCTIVE, f"git:{sub}-force", f"`git {sub}` with -f or paths discards local changes"
    if sub == "restore":
        return DESTRUCTIVE, "git:restore", "`git restore` discards local changes"
    if sub == "push" and ("f" in shorts or longs & {"--force", "--force-with-lease", "--delete", "--mirror"}):
        return DESTRUCTIVE, "git:push-force", "`git push --force/--delete` overwrites or deletes remote history"
    return MUTATING, f"git:{sub or 'unknown'}", f"`git {sub or '...'}` changes the repository or its configuration"
