"""pip_install: exact pins from exactly the named indexes, and what changed.

pip normally also reads the host's and the user's configuration files and PIP_* variables, which
can add indexes, find-links, constraints or a target directory nobody approved. This tool runs pip
with PIP_CONFIG_FILE=/dev/null (pip then loads no configuration file at all) and every PIP_*
variable unset, so only the index URLs in its arguments are used. It reports the freeze diff
(package, before, after), pip's dependency warnings (`pip check`), and a warning when the wheels it
installed leave a CUDA mismatch that breaks JIT-compiling packages.
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, Field, field_validator

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError, run_live, truncate_for_model
from tools.hosts import HostError
from tools.inspect_host import parse_nvcc
from tools.pip_freeze_backup import PIP_ENV as BACKUP_PIP_ENV
from tools.pip_freeze_backup import parse_freeze

# name==version, the version with an optional local part (+cu130); nothing else (no URL, path, extra, option).
PIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?==[0-9][0-9A-Za-z.!_-]*(?:\+[0-9A-Za-z.]+)?$")
INDEX = re.compile(r"^(https://|file:///)[^\s'\"\\]+$")
# Packages that compile CUDA code at run time against the toolkit on PATH (or CUDA_HOME).
JIT_PACKAGES = ("flashinfer-python", "sgl-kernel", "deep-gemm", "deep_gemm")
# The backup's pip settings, and no configuration file at all (pip then loads none).
PIP_ENV = {**BACKUP_PIP_ENV, "PIP_CONFIG_FILE": "/dev/null"}
# Run in the host's shell before pip: no other PIP_* variable from the host's configuration reaches it.
UNSET_PIP = ('unset $(compgen -e | grep "^PIP_" | grep -v ' + " ".join(f'-e "^{k}$"' for k in PIP_ENV)
             + ") 2>/dev/null; ")


def wheel_cuda(version: str) -> str | None:
    """The CUDA a wheel's local version names: 2.10.0+cu130 (or torch==2.10.0+cu130) -> "13.0"."""
    m = re.search(r"\+cu(\d+)(\d)$", version)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def canonical_pin(pin: str) -> str:
    """A pin (or a rule's pin pattern) with its name as PEP 503 normalizes it: Sgl_Kernel==X is sgl-kernel==X."""
    name, sep, version = pin.partition("==")
    return re.sub(r"[-_.]+", "-", name).lower() + sep + version


class PipInstallArgs(StrictArgs):
    host: str = Field(description="host in this session")
    packages: list[str] = Field(min_length=1, max_length=50,
                                description="exact pins, name==version (local versions such as +cu130 allowed), "
                                            "e.g. [\"torch==2.10.0+cu130\", \"sgl-kernel==0.3.21+cu130\"]")
    index_url: str = Field(description="the one index to install from (https:// or file:///), e.g. "
                                       "https://download.pytorch.org/whl/cu130")
    extra_index_urls: list[str] = Field(default_factory=list, max_length=4,
                                        description="further indexes (default none: only index_url is used)")
    no_deps: bool = Field(default=False, description="install only the named pins, not their dependencies")
    python: str | None = Field(default=None, description="interpreter whose environment changes (default: the "
                                                         "host's configured one)")

    @field_validator("packages")
    @classmethod
    def _pins(cls, v: list[str]) -> list[str]:
        bad = [p for p in v if not PIN.match(p)]
        if bad:
            raise ValueError(f"{bad} are not exact pins: give each package as name==version (e.g. "
                             f"torch==2.10.0+cu130); URLs, paths, extras and options are not accepted")
        names = [p.split("==")[0].lower().replace("_", "-") for p in v]
        if len(set(names)) != len(names):
            raise ValueError("each package may appear once")
        return v

    @field_validator("index_url")
    @classmethod
    def _index(cls, v: str) -> str:
        if not INDEX.match(v):
            raise ValueError(f"{v!r} is not an index URL: give https://... or file:///...")
        return v.rstrip("/")

    @field_validator("extra_index_urls")
    @classmethod
    def _extras(cls, v: list[str]) -> list[str]:
        return [cls._index(u) for u in v]


class Change(BaseModel):
    package: str
    before: str | None  # None: newly installed
    after: str | None  # None: removed


class PipInstallResult(BaseModel):
    python: str
    packages: list[str]
    index_urls: list[str]
    changes: list[Change]
    dependency_warnings: list[str] = Field(description="what `pip check` reports after the install")
    warnings: list[str] = Field(description="what the install leaves at risk, e.g. a CUDA mismatch")


class PipInstall(Tool):
    """Install exact package pins into a Python environment from exactly the named indexes.

    Only `index_url` (and `extra_index_urls`, default none) are used: the host's pip configuration
    and PIP_* variables are ignored. Reports what changed (package, before, after), pip's dependency
    warnings, and a warning when the new wheels' CUDA does not match the toolkit on PATH while a
    JIT-compiling package (flashinfer, sgl-kernel) is installed. Mutating: it needs a verified backup
    of the host and an approval (a goal file authorization or the operator). Install the CUDA toolkit
    the wheels need first, and verify it; if that step is refused, leave the wheels alone.
    """

    name = "pip_install"
    Args = PipInstallArgs
    Result = PipInstallResult
    pinned = ("packages", "index_url", "extra_index_urls", "no_deps", "python")

    @classmethod
    def canonical(cls, name: str, value):
        if name == "packages" and isinstance(value, list):
            return [canonical_pin(p) for p in value]
        if name in ("index_url", "extra_index_urls"):
            return [u.rstrip("/") for u in value] if isinstance(value, list) else value.rstrip("/")
        return value

    def action(self, args: PipInstallArgs) -> Action:
        indexes = [args.index_url, *args.extra_index_urls]
        subject = (f"pip_install python={args.python or '(default)'} index={' '.join(indexes)}"
                   + (" --no-deps" if args.no_deps else "") + " " + " ".join(args.packages))
        return Action(host=args.host, subject=subject,
                      risk=Risk(cls=RiskClass.MUTATING, rule="tool:pip_install",
                                reason="installs packages into the Python environment"),
                      args={"packages": self.canonical("packages", list(args.packages)),
                            "index_url": args.index_url, "extra_index_urls": list(args.extra_index_urls),
                            "no_deps": args.no_deps, "python": args.python},
                      defaults={"extra_index_urls": [], "no_deps": False, "python": None},
                      interpreter=args.python)

    def run(self, ctx: ToolContext, args: PipInstallArgs) -> PipInstallResult:
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        py = args.python or host.spec.python or "python3"
        q = shlex.quote(py)

        def pip(line: str, what: str, timeout: float = 300, live: bool = False):
            ctx.emit("progress", {"step": what})
            runner = (lambda c, **kw: run_live(ctx, host, c, **kw)) if live else host.run
            r = runner(UNSET_PIP + f"{q} -m pip {line}", timeout=timeout, env=PIP_ENV, cancel=ctx.cancel)
            if r.cancelled:
                raise ToolError(f"cancelled {ctx.cancel_reason()} while {what}")
            return r

        before_r = pip("freeze --all", "reading the environment")
        if not before_r.ok:
            raise ToolError(f"`{py} -m pip freeze` failed (exit {before_r.exit_code}): "
                            f"{truncate_for_model((before_r.stderr or before_r.stdout).strip(), 1000)}; nothing was "
                            "installed")
        before = parse_freeze(before_r.stdout)
        indexes = [args.index_url, *args.extra_index_urls]
        line = ("install --no-input " + (f"--index-url {shlex.quote(args.index_url)} ")
                + "".join(f"--extra-index-url {shlex.quote(u)} " for u in args.extra_index_urls)
                + ("--no-deps " if args.no_deps else "") + " ".join(shlex.quote(p) for p in args.packages))
        r = pip(line, f"installing {len(args.packages)} packages from {indexes[0]}", timeout=1800, live=True)
        after_r = pip("freeze --all", "reading the result")
        after = parse_freeze(after_r.stdout) if after_r.ok else before
        changes = [Change(package=n, before=before.get(n), after=after.get(n))
                   for n in sorted(set(before) | set(after)) if before.get(n) != after.get(n)]
        if not r.ok:
            done = f"; it changed {len(changes)} packages before it stopped" if changes else "; nothing was changed"
            raise ToolError(f"pip install failed (exit {r.exit_code}){done}: "
                            f"{truncate_for_model((r.stderr or r.stdout).strip(), 2000)}")
        check = pip("check", "checking dependencies")
        dependency_warnings = [ln for ln in (check.stdout + check.stderr).splitlines()
                               if ln.strip() and "No broken requirements" not in ln] if not check.ok else []
        return PipInstallResult(python=py, packages=list(args.packages), index_urls=indexes, changes=changes,
                                dependency_warnings=dependency_warnings,
                                warnings=self._cuda_mismatch(host, after, ctx))

    def _cuda_mismatch(self, host, freeze: dict[str, str], ctx: ToolContext) -> list[str]:
        wheels = wheel_cuda(freeze.get("torch", ""))
        jit = [name for name in JIT_PACKAGES if name in freeze]
        if wheels is None or not jit:
            return []
        r = host.run("nvcc --version", timeout=60, cancel=ctx.cancel)
        toolkit, _ = parse_nvcc(r.stdout) if r.ok else (None, None)
        if toolkit is None:
            return [f"torch is built for CUDA {wheels}, and no nvcc is on PATH: {', '.join(jit)} compile CUDA code "
                    "at run time and need a toolkit of that CUDA major (set CUDA_HOME to it)"]
        if toolkit.split(".")[0] != wheels.split(".")[0]:
            major = wheels.split(".")[0]
            found = host.run(f"ls -d /usr/local/cuda-{major}.* 2>/dev/null | sort -V | tail -n 1", timeout=30,
                             cancel=ctx.cancel).stdout.strip()
            fix = (f"a CUDA {major} toolkit is installed at {found} but not on PATH: run what uses these wheels with "
                   f"CUDA_HOME={found} (run_bench's env), or move the cuda symlink (a separate, destructive step)"
                   if found else f"install a CUDA {major}.x toolkit first, then set CUDA_HOME to it")
            return [f"torch is built for CUDA {wheels} but the toolkit on PATH is {toolkit}: {', '.join(jit)} compile "
                    f"CUDA code at run time with that toolkit and will fail; {fix}"]
        return []
