"""The sim's Python virtual environment: built once as a template, copied into each sim.

Creating a venv with pip and installing the stack takes seconds; copying a finished one takes a
fraction of that. A copied venv only needs the places that name its own directory rewritten:
the scripts' shebangs, the activate scripts and pyvenv.cfg. Everything else in a venv is
relative or points at the base interpreter, which does not move.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

# Linux's limit for a shebang line (BINPRM_BUF_SIZE - 1); longer ones get pip's /bin/sh wrapper.
_SHEBANG_MAX = 127

STACK = ("torch==2.10.0+cu128", "sglang==0.5.9", "sgl-kernel==0.3.21+cu128", "flashinfer-python==0.6.4",
         "vllm==0.16.0")


class SimBuildError(RuntimeError):
    """Building the sim's Python environment failed; the message ends with the tool's own words."""


def pip_env() -> dict[str, str]:
    """A pip that reads no user configuration, never looks at the network, and sees only the venv.

    PYTHONPATH and the other PYTHON* variables are dropped: a caller that points PYTHONPATH at a
    source checkout (tests, `PYTHONPATH=. agent ...`) would otherwise put that checkout's egg-info
    into the venv's view, and `pip check` would fail on its unmet requirements.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1", PIP_CONFIG_FILE=os.devnull,
               PIP_NO_INPUT="1")
    return env


def build_template(dest: Path, base_python: str, index_dir: Path) -> None:
    """A venv at `dest` with pip and the sim's cu128 stack installed from `index_dir` (offline)."""
    _run("python -m venv", [base_python, "-m", "venv", str(dest)], env=pip_env())
    python = dest / "bin" / "python"
    _run("pip install", [str(python), "-m", "pip", "install", "--index-url", index_dir.as_uri(), *STACK],
         env=pip_env())
    # A pip check proves the dependency metadata is consistent, as a resolver-installed env would be.
    _run("pip check", [str(python), "-m", "pip", "check"], env=pip_env())


def _run(what: str, argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise SimBuildError(f"building the simulated host's Python environment failed: {what} exited "
                            f"{done.returncode}: " + " | ".join(said or ["(no output)"]))


def copy(template: Path, template_origin: str, dest: Path, pip_conf: str, seen_as: str | None = None) -> None:
    """Copy the template venv to `dest` and make it belong where its host sees it (`seen_as`, or `dest`)."""
    shutil.copytree(template, dest, symlinks=True)
    new = seen_as or str(dest)
    rewritten = {}
    for path in (dest / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if template_origin.encode() not in data:
            continue
        text = data.decode()
        if text.startswith("#!"):
            text = _rewrite_shebang(text, template_origin, new)
        path.write_text(text.replace(template_origin, new))
        rewritten[path.name] = path.read_bytes()
    _rerecord(dest, rewritten)
    cfg = dest / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(template_origin, new))
    (dest / "pip.conf").write_text(pip_conf)


# pip's (distlib's) shebang for an interpreter path too long for the kernel: sh runs the script with it. The
# path is quoted only where it holds a space.
_SH_WRAPPER = re.compile(r"""#!/bin/sh\n'''exec' ("[^"]+"|\S+) "\$0" "\$@"\n' '''\n""")


def _rewrite_shebang(text: str, old: str, new: str) -> str:
    """The script's shebang for the interpreter at its new place, as pip would have written it there: a plain
    shebang where the path fits the kernel's limit, else pip's /bin/sh wrapper."""
    wrapped = _SH_WRAPPER.match(text)
    if wrapped:
        interpreter, rest = wrapped.group(1).strip('"'), text[wrapped.end():]
    else:
        first, _, rest = text.partition("\n")
        interpreter = first[2:].strip()
    interpreter = interpreter.replace(old, new)
    if len(f"#!{interpreter}") <= _SHEBANG_MAX:
        return f"#!{interpreter}\n{rest}"
    quoted = f'"{interpreter}"' if " " in interpreter else interpreter
    return f"""#!/bin/sh\n'''exec' {quoted} "$0" "$@"\n' '''\n{rest}"""


def _rerecord(venv: Path, scripts: dict[str, bytes]) -> None:
    """The RECORD lines of rewritten scripts made true again (hash and size), as pip writes them: a RECORD that
    still held the template's would show where the sim was built, and differ between two sims' builds."""
    for record in venv.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        rows = list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
        changed = False
        for row in rows:
            name = row[0].rsplit("/", 1)[-1] if row and row[0].startswith("../../../bin/") else None
            if name in scripts and len(row) == 3:
                digest = base64.urlsafe_b64encode(hashlib.sha256(scripts[name]).digest()).rstrip(b"=").decode()
                row[1:] = [f"sha256={digest}", str(len(scripts[name]))]
                changed = True
        if changed:
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(rows)
            record.write_text(out.getvalue(), encoding="utf-8")
