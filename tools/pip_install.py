"""pip_install: exact pins from exactly the named indexes, and what changed.

pip normally also reads the host's and the user's configuration files and PIP_* variables, which
can add indexes, find-links, constraints or a target directory nobody approved. This tool runs pip
with PIP_CONFIG_FILE=/dev/null (pip then loads no configuration file at all) and every PIP_*
variable unset, so only the index URLs in its arguments are used. It reports the freeze diff
(package, before, after), pip's dependency warnings (`pip check`), and a warning when the wheels it
installed leave a CUDA mismatch that breaks JIT-compiling packages.

After every install, with no_deps or without, `pip check` runs in the same environment. A requirement
it finds unmet that involves a package this install changed (a requirement of one it installed, or one
it replaced or removed) fails the step: pip's own warning ("torch requires nvidia-nccl-cu13, which is
not installed") is otherwise easy to miss while the environment is broken. What pip check reports
about packages the install did not touch was broken before it and is only reported. A goal that
accepts a broken environment says so with allow_broken_requirements: true.
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, Field, field_validator

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError, run_live, truncate_for_model
from tools.hosts import HostError
from tools.inspect_host import parse_nvcc
from tools.pip_freeze_backup import PIP_ENV as BACKUP_PIP_ENV
from tools.pip_freeze_backup import normalize, parse_freeze

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


# `pip check`'s lines (pip/_internal/commands/check.py): a requirement missing, one in conflict, a wheel
# for another platform. `who` is the package whose requirement it is; `dep` the package it names.
CHECK_LINES = (
    re.compile(r"^(?P<who>\S+) \S+ requires (?P<dep>[^,\s]+), which is not installed\.$"),
    re.compile(r"^(?P<who>\S+) \S+ has requirement (?P<req>.+), but you have (?P<dep>\S+) \S+\.$"),
    re.compile(r"^(?P<who>\S+) \S+ is not supported on this platform\.?$"),
)
# How a failed step's error starts, so a record's reader (a recipe) knows the install ran and changed the host.
UNMET = "the install left declared requirements unmet"
# Prints each named package's Requires-Dist, one "name<TAB>requirement" a line (standard library only).
READ_REQUIRES = ("import importlib.metadata as m, sys\n"
                 "for n in sys.argv[1:]:\n"
                 "    for r in m.requires(n) or []: print(n + '\\t' + r)\n")


def blamed_on_install(lines: list[str], touched: set[str]) -> list[str]:
    """The `pip check` lines that involve a package this install changed (normalized names): the
    requirement of a package it installed, or a requirement on one it replaced or removed. The others
    were broken before the install and are not its doing."""
    blamed = []
    for line in lines:
        m = next((m for m in (p.match(line.strip()) for p in CHECK_LINES) if m), None)
        if m and (normalize(m["who"]) in touched or normalize(m.groupdict().get("dep") or "") in touched):
            blamed.append(line.strip())
    return blamed


def cancelled_error(ctx: ToolContext, what: str, r, installed: list) -> str:
    """What a cancelled run knows: before pip install ended, that it may have installed some of the
    packages or none; after, how the install itself ended (a cancel of the freeze or `pip check`
    that follows does not undo it)."""
    said = f"cancelled {ctx.cancel_reason()} while {what}, after {r.duration_s:.1f} s"
    if not installed:
        if what.startswith("installing"):
            return (f"{said}: pip had started, so the environment may hold all, some or none of the new "
                    "packages (outcome unknown)")
        return f"{said}: pip install had not started, nothing was installed"
    ended = installed[0]
    how = "exit 0: the packages are installed" if ended.ok else f"exit {ended.exit_code}"
    return f"{said}: pip install itself had ended ({how}); what changed was not read"


def _version(requirement: str | None) -> str:
    """`torch==2.10.0+cu130` -> `2.10.0+cu130`; None (not installed) -> `none`."""
    return (requirement or "none").partition("==")[2] or (requirement or "none")


def wheel_cuda(version: str) -> str | None:
    """The CUDA a wheel's local version names: 2.10.0+cu130 (or torch==2.10.0+cu130) -> "13.0"."""
    m = re.search(r"\+cu(\d+)(\d)$", version)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def mixed_cuda_builds(freeze: dict[str, str]) -> list[str]:
    """Packages built for another CUDA major than torch, after an install: their compiled code links that major's
    runtime libraries (libcudart.so.12), which torch's wheels no longer bring, so they fail to load, though
    `pip check` finds nothing (no requirement names a CUDA build)."""
    torch = wheel_cuda(freeze.get("torch", ""))
    if torch is None:
        return []
    major = torch.split(".")[0]
    other = sorted(line for name, line in freeze.items()
                   if name != "torch" and (built := wheel_cuda(line)) and built.split(".")[0] != major)
    if not other:
        return []
    return [f"{', '.join(other)} {'is' if len(other) == 1 else 'are'} built for another CUDA major than "
            f"{freeze['torch']}: compiled against that major's runtime, which torch's wheels no longer bring, "
            f"{'it' if len(other) == 1 else 'they'} will likely fail to load (`pip check` cannot see this); install "
            f"{'its' if len(other) == 1 else 'their'} +cu{torch.replace('.', '')} build too, or roll back"]


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
    no_deps: bool = Field(default=False, description="install only the named pins, not their dependencies (then "
                                                     "name every requirement they declare in packages too)")
    allow_broken_requirements: bool = Field(
        default=False, description="let the step succeed although `pip check` finds requirements of what it "
                                   "installed unmet (default false: that fails the step); only where the goal "
                                   "accepts a broken environment")
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
    unmet_requirements: list[str] = Field(default_factory=list,
                                          description="the dependency warnings that involve what this install "
                                                      "changed (left so only by allow_broken_requirements)")
    warnings: list[str] = Field(description="what the install leaves at risk, e.g. a CUDA mismatch")


class PipInstall(Tool):
    """Install exact package pins into a Python environment from exactly the named indexes.

    Only `index_url` (and `extra_index_urls`, default none) are used: the host's pip configuration
    and PIP_* variables are ignored. Reports what changed (package, before, after), pip's dependency
    warnings, and a warning when the new wheels' CUDA does not match the toolkit on PATH while a
    JIT-compiling package (flashinfer, sgl-kernel) is installed. Mutating: it needs a verified backup
    of the host and an approval (a goal file authorization or the operator). Install the CUDA toolkit
    the wheels need first, and verify it; if that step is refused, leave the wheels alone.
    After the install `pip check` runs: a requirement of what it installed that is not met fails the
    step (with no_deps, name the requirements in packages too).
    """

    name = "pip_install"
    Args = PipInstallArgs
    Result = PipInstallResult
    pinned = ("packages", "index_url", "extra_index_urls", "no_deps", "allow_broken_requirements", "python")

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
                   + (" --no-deps" if args.no_deps else "")
                   + (" (broken requirements allowed)" if args.allow_broken_requirements else "")
                   + " " + " ".join(args.packages))
        return Action(host=args.host, subject=subject,
                      risk=Risk(cls=RiskClass.MUTATING, rule="tool:pip_install",
                                reason="installs packages into the Python environment"),
                      args={"packages": self.canonical("packages", list(args.packages)),
                            "index_url": args.index_url, "extra_index_urls": list(args.extra_index_urls),
                            "no_deps": args.no_deps, "allow_broken_requirements": args.allow_broken_requirements,
                            "python": args.python},
                      defaults={"extra_index_urls": [], "no_deps": False, "allow_broken_requirements": False,
                                "python": None},
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
                raise ToolError(cancelled_error(ctx, what, r, installed))
            return r

        installed: list = []  # the install's own result, once pip install has ended

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
        installed.append(r)
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
        unmet = blamed_on_install(dependency_warnings, {normalize(c.package) for c in changes})
        if unmet and not args.allow_broken_requirements:
            raise ToolError(self._unmet_error(host, q, args, unmet, changes, ctx))
        return PipInstallResult(python=py, packages=list(args.packages), index_urls=indexes, changes=changes,
                                dependency_warnings=dependency_warnings, unmet_requirements=unmet,
                                warnings=mixed_cuda_builds(after) + self._cuda_mismatch(host, after, ctx))

    def _unmet_error(self, host, q: str, args: PipInstallArgs, unmet: list[str], changes: list[Change],
                     ctx: ToolContext) -> str:
        """The failed step's one line: what pip check found, what the install left changed, what to do."""
        needed = self._needed_pins(host, q, unmet, ctx)
        changed = ", ".join(f"{c.package} {_version(c.before)} -> {_version(c.after)}" for c in changes)
        fix = (f"install {', '.join(needed)} from {args.index_url} too (add them to packages)" if needed else
               f"install the named requirements from {args.index_url} too (add their pins to packages)")
        return (f"{UNMET} (`pip check`): {' '.join(unmet)} What it changed stays installed ({changed}). To finish: "
                f"{fix}" + (", or call again without no_deps so pip installs them" if args.no_deps else "")
                + "; only where the goal accepts a broken environment, allow_broken_requirements: true (its "
                  "authorization must name it); restore_backup undoes the install")

    def _needed_pins(self, host, q: str, unmet: list[str], ctx: ToolContext) -> list[str]:
        """The requirements missing, as the installed packages declare them (Requires-Dist, without markers):
        `torch requires nvidia-nccl-cu13` becomes nvidia-nccl-cu13==2.28.9. Empty when they cannot be read."""
        missing = [m for m in (CHECK_LINES[0].match(line) for line in unmet) if m]
        if not missing:
            return []
        whose = sorted({m["who"] for m in missing})
        r = host.run(f"{q} -c {shlex.quote(READ_REQUIRES)} " + " ".join(shlex.quote(n) for n in whose),
                     timeout=60, cancel=ctx.cancel)
        declared: dict[tuple[str, str], str] = {}
        for line in r.stdout.splitlines() if r.ok else []:
            who, _, requirement = line.partition("\t")
            spec = requirement.split(";", 1)[0].strip()
            name = re.split(r"[=<>!~ (\[]", spec, maxsplit=1)[0]
            declared[(normalize(who), normalize(name))] = spec.replace(" ", "")
        return sorted({declared.get((normalize(m["who"]), normalize(m["dep"])), m["dep"]) for m in missing})

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
