"""find: the actions that run programs, write files or delete."""

from __future__ import annotations

import fnmatch

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, _Cmd
from agent.safety.classifier.registry import _handles
from agent.safety.classifier.words import _join

_FIND_RUNNERS = ("-exec", "-execdir", "-ok", "-okdir")
_FIND_WRITERS = ("-fprint", "-fprint0", "-fprintf", "-fls")
_FIND_DANGEROUS = _FIND_RUNNERS + _FIND_WRITERS + ("-delete",)


@_handles("find")
def _find(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    clean = True
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        index += 1
        if text in _FIND_RUNNERS:
            end = index
            while end < len(args) and args[end].text not in (";", "+"):
                end += 1
            inner = args[index:end]
            an.add(
                MUTATING,
                f"find:{text}",
                f"`find` with {text} runs another command",
                structural=True,
                decoded=_join(inner) if inner else None,
            )
            an.inner_words(inner, f"find {text}")
            index = end + 1
            clean = False
        elif text == "-delete":
            an.add(DESTRUCTIVE, "find:-delete", "`find -delete` deletes every file it matches")
            clean = False
        elif text in _FIND_WRITERS:
            an.add(MUTATING, f"find:{text}", f"`find {text}` writes its output to a file")
            if index < len(args):
                an.write(args[index], f"`find {text}`", "find")
            index += 1
            clean = False
        elif arg.pattern and text and any(fnmatch.fnmatchcase(d, text) for d in _FIND_DANGEROUS):
            an.add(
                MUTATING,
                "find:glob-option",
                f"the unquoted pattern `{text}` could expand to a find action such as -delete or -exec",
            )
            clean = False
    if clean:
        an.allow(cmd, check_globs=False)
