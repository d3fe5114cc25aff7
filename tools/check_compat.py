"""check_compat: before acting, can a target CUDA run on this host, and what would the plan break?

It reads the host the way inspect_host does and compares it with the target, each finding with its
source: the driver's minimum for the target's CUDA major (NVIDIA's minor-version compatibility:
13.x needs a driver of 580 or newer, 12.x 525, and 12.8 on Blackwell 570), the GPU architectures the
target drops or needs (CUDA 13 drops Maxwell, Pascal and Volta; Blackwell needs 12.8 or newer),
wheels built for another CUDA major than the target while a JIT-compiling package is installed,
torch that cannot see the GPUs now, with torch's own error, and the room the toolkit's install needs
in /tmp and under /usr/local against what their filesystems have (tools/toolkit_sizes.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, norm_path
from tools.inspect_host import InspectHost
from tools.install_runfile import MIN_DRIVER  # the installer refuses on the same table
from tools.pip_install import JIT_PACKAGES, wheel_cuda
from tools.system_state import LISTED_TOOLKIT
from tools.toolkit_sizes import Place, install_places, mount_and_free, needs_for, shortfalls

RELEASE_NOTES = "NVIDIA CUDA Toolkit release notes, table 'CUDA Toolkit and minimum required driver version'"
GPU_NOTES = "NVIDIA driver release notes, supported products (Blackwell GPUs need the 570 driver branch or newer)"
ARCH_NOTES = "NVIDIA CUDA Toolkit release notes, 'Deprecated and dropped features' / supported architectures"
PATH = r"^/[^\x00-\x1f\x7f]*$"  # an absolute path of printable characters
# Architectures (compute capability majors) a CUDA major can no longer build for.
DROPPED = {13: {5: "Maxwell", 6: "Pascal", 7: "Volta"}}  # 7.5 Turing stays; checked below


class Finding(BaseModel):
    what: str
    source: str


class SpaceNeed(BaseModel):
    path: str
    mount: str | None = Field(description="the filesystem the path is on (for one not made yet, its nearest parent's)")
    free_gib: float | None
    need_gib: float
    why: str


class CheckCompatResult(BaseModel):
    host: str
    cuda: str
    ok: bool = Field(description="true when nothing blocks the target")
    blockers: list[Finding]
    risks: list[Finding]
    driver: str | None
    driver_cuda: str | None
    gpus: list[str]
    toolkit_on_path: str | None
    torch: str | None
    space: list[SpaceNeed] = Field(default_factory=list, description="what installing the toolkit side by side "
                                   "needs free in each place (default tmpdir and toolkit_path), and what it has")


class CheckCompat(Tool):
    """Check whether a target CUDA toolkit (and wheels built for it) can run on a host, before acting.

    Read-only. Lists what blocks the target (a driver too old for its CUDA major, GPUs it drops or that
    need a newer CUDA, too little room for the toolkit where it would be unpacked and installed: /tmp
    and /usr/local/cuda-X.Y unless you give the tmpdir and toolkit_path you mean to use; `space` gives each
    figure) and what the plan would endanger (torch built for another CUDA while a
    JIT-compiling package is installed, torch that cannot see the GPUs now), each with its source.
    Call it with inspect_host before the first change; if something blocks, do not upgrade: report it.
    """

    name = "check_compat"

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        cuda: str = Field(pattern=r"^\d+\.\d+$", description="target CUDA toolkit version X.Y, e.g. 13.0")
        python: str | None = Field(default=None, description="interpreter whose torch to check (default: the "
                                                             "host's configured one)")
        tmpdir: str = Field(default="/tmp", pattern=PATH, description="the installer's temp dir to check the room in "
                                                                      "(install_runfile's tmpdir)")
        toolkit_path: str | None = Field(default=None, pattern=PATH, description="where the toolkit would go "
                                         "(install_runfile's toolkit_path; default /usr/local/cuda-X.Y)")

    Result = CheckCompatResult

    def action(self, args) -> Action:
        return Action(host=args.host, subject=f"check_compat cuda={args.cuda} python={args.python or '(default)'}"
                                              + (f" tmpdir={args.tmpdir}" if args.tmpdir != "/tmp" else "")
                                              + (f" toolkit_path={args.toolkit_path}" if args.toolkit_path else ""),
                      risk=Risk(cls=RiskClass.READ_ONLY, rule="tool:check_compat",
                                reason="reads versions and GPUs; changes nothing"),
                      interpreter=args.python)

    def run(self, ctx: ToolContext, args) -> CheckCompatResult:
        inspect = InspectHost()
        facts = inspect.run(ctx, inspect.parse_args({"host": args.host, "python": args.python}))
        major, minor = (int(x) for x in args.cuda.split("."))
        blockers, risks = [], []
        driver = facts.driver.version if facts.driver else None
        driver_cuda = facts.driver.cuda_version if facts.driver else None
        if driver is None:
            blockers.append(Finding(what="no NVIDIA driver answers (nvidia-smi failed): nothing CUDA can run",
                                    source="nvidia-smi on the host"))
        else:
            need = MIN_DRIVER.get(major)
            have = int(driver.split(".")[0])
            if need is not None and have < need:
                blockers.append(Finding(what=f"CUDA {args.cuda} needs a driver of {need} or newer; this host has "
                                             f"{driver} (it supports CUDA {driver_cuda} at most): the driver must be "
                                             f"upgraded first (a toolkit alone cannot change this)",
                                        source=RELEASE_NOTES))
        for gpu in facts.gpus:
            cc = gpu.compute_capability or ""
            try:
                cc_major, cc_minor = (int(x) for x in cc.split(".")[:2])
            except ValueError:
                continue
            dropped = DROPPED.get(major, {})
            if cc_major in dropped and (cc_major, cc_minor) != (7, 5):
                blockers.append(Finding(what=f"GPU {gpu.index} ({gpu.name}, compute capability {cc}, "
                                             f"{dropped[cc_major]}) is not supported by CUDA {major}",
                                        source=ARCH_NOTES))
            if cc_major >= 10 and (major, minor) < (12, 8):
                blockers.append(Finding(what=f"GPU {gpu.index} ({gpu.name}, compute capability {cc}, Blackwell) "
                                             f"needs CUDA 12.8 or newer", source=ARCH_NOTES))
            if cc_major >= 10 and driver is not None and int(driver.split(".")[0]) < 570:
                blockers.append(Finding(what=f"GPU {gpu.index} ({gpu.name}, Blackwell) needs a driver of 570 or "
                                             f"newer to run at all; this host has {driver}", source=GPU_NOTES))
        py = facts.python
        torch = py.torch if py else None
        if py is not None and py.torch and py.cuda_available is False:
            risks.append(Finding(what=f"torch {py.torch} cannot see the GPUs now"
                                      + (f": {py.error}" if py.error else " (torch.cuda.is_available() is False)"),
                                 source="torch on the host"))
        jit = [name for name in JIT_PACKAGES if py is not None and name in py.packages]
        built = wheel_cuda(torch or "")
        if built is not None and jit:
            if int(built.split(".")[0]) != major:
                risks.append(Finding(what=f"torch is built for CUDA {built} and {', '.join(jit)} "
                                          f"compile CUDA code at run time: after a CUDA {major} toolkit, move the "
                                          f"wheels to +cu{major}{minor} builds too, and run them with CUDA_HOME set "
                                          f"to the new toolkit (wheels moved to +cu{major}{minor} without a CUDA "
                                          f"{major} toolkit fail as those packages compile: torch refuses an nvcc of "
                                          "another CUDA major)", source="the installed packages"))
        if args.toolkit_path and not LISTED_TOOLKIT.match(norm_path(args.toolkit_path)):
            risks.append(Finding(what=f"a toolkit at {args.toolkit_path} is undone by no backup (a backup lists, and a "
                                      "restore removes, the toolkits at /usr/local/cuda-* only): installing it there "
                                      "needs a goal rule that says irreversible: true, and it comes off by hand",
                                 source="pip_freeze_backup and restore_backup"))
        space = _space(ctx, args)
        for short in shortfalls(space):
            blockers.append(Finding(what=f"too little room for the CUDA {args.cuda} toolkit: {short} (the places "
                                         f"checked: tmpdir {args.tmpdir}, toolkit_path "
                                         f"{args.toolkit_path or f'/usr/local/cuda-{args.cuda}'}); "
                                         "install_runfile refuses it before anything is downloaded (free space there, "
                                         "or, where the goal allows another tmpdir or toolkit_path, check_compat with "
                                         "those)",
                                    source=f"df on the host; {needs_for(args.cuda).source}"))
        return CheckCompatResult(host=args.host, cuda=args.cuda, ok=not blockers, blockers=_unique(blockers),
                                 risks=risks, driver=driver, driver_cuda=driver_cuda,
                                 gpus=sorted({f"{g.name} ({g.compute_capability})" for g in facts.gpus}),
                                 toolkit_on_path=facts.toolkit_on_path.version if facts.toolkit_on_path else None,
                                 torch=torch,
                                 space=[SpaceNeed(path=p.path, mount=p.mount, need_gib=round(p.need_bytes / 2**30, 1),
                                                  free_gib=None if p.free_bytes is None else
                                                  round(p.free_bytes / 2**30, 1), why=p.why) for p in space])


def _space(ctx: ToolContext, args) -> list[Place]:
    """The places an install of `args.cuda` writes to (the tmpdir, the toolkit_path's parent) with what it needs
    there and what their filesystems have free (df on the host); none for a release whose figures nobody knows."""
    needs = needs_for(args.cuda)
    if needs is None:
        return []
    host = ctx.hosts.get(args.host)

    def sh(command: str):
        return host.run(command, timeout=60, cancel=ctx.cancel)

    places = install_places(needs, norm_path(args.tmpdir), norm_path(args.toolkit_path or f"/usr/local/cuda-{args.cuda}"))
    return [Place(path, need, why, *mount_and_free(sh, path)) for path, need, why in places]


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per kind for a box of identical GPUs: the first GPU's stands for the others."""
    seen, out = set(), []
    for f in findings:
        key = f.what.split(")", 1)[-1]
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
