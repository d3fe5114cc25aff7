"""Text tools with options that write or run programs: sort, uniq, printf, file, rg, base64."""

from __future__ import annotations

from agent.safety.classifier.command import MUTATING, _Cmd
from agent.safety.classifier.options import _abbreviates, _getopt, _long_options, _short_options
from agent.safety.classifier.registry import _HANDLERS, _checked
from tools.base import RiskClass


def _sort_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for arg in cmd.args:
        text = arg.text or ""
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            if name == "--output" or _abbreviates(name, "--output", 3):
                return MUTATING, "sort:-o", "`sort -o` writes its output to a file"
            if name == "--compress-program" or _abbreviates(name, "--compress-program", 5):
                return MUTATING, "sort:--compress-program", "`sort --compress-program` runs another program"
        elif text.startswith("-") and len(text) > 1:
            for letter in text[1:]:
                if letter == "o":
                    return MUTATING, "sort:-o", "`sort -o` writes its output to a file"
                if letter in "ktST":
                    break  # the rest of the cluster is this option's value
    return None


def _uniq_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    opts = _getopt(cmd.args, short_value="fsw", long_value={"--skip-fields", "--skip-chars", "--check-chars",
                                                             "--group", "--all-repeated"}, permute=True)
    if len(opts.operands) >= 2:
        return MUTATING, "uniq:output-file", "`uniq INPUT OUTPUT` writes to OUTPUT"
    return None


def _printf_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if cmd.args and (cmd.args[0].text or "").startswith("-v"):
        return MUTATING, "printf:-v", "`printf -v` assigns a shell variable, which can change later commands"
    return None


def _file_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if "C" in _short_options(cmd.args) or any(_abbreviates(n, "--compile", 4) for n in _long_options(cmd.args)):
        return MUTATING, "file:-C", "`file -C` compiles a magic file and writes it"
    return None


def _rg_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for name in _long_options(cmd.args):
        if name in ("--pre", "--hostname-bin"):
            return MUTATING, f"rg:{name}", f"`rg {name}` runs another program"
    return None


def _base64_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if "o" in _short_options(cmd.args) or "--output" in _long_options(cmd.args):
        return MUTATING, "base64:-o", "`base64 -o` writes a file"
    return None


_HANDLERS["sort"] = _checked(_sort_check)
_HANDLERS["uniq"] = _checked(_uniq_check)
_HANDLERS["printf"] = _checked(_printf_check)
_HANDLERS["file"] = _checked(_file_check)
_HANDLERS["rg"] = _checked(_rg_check)
_HANDLERS["base64"] = _checked(_base64_check)
