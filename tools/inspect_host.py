"""inspect_host: what an expert checks first on a GPU box, in one round trip.

One read-only script prints labelled sections; the parsing happens here. Missing pieces
(no GPU, no nvcc, no torch) are facts in the result, never errors.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import shlex

from pydantic import BaseModel, Field

from tools import schedulers
from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError
from tools.hosts import HostError
from tools.sandbox import outside_the_sandbox
from tools.schedulers import Scheduler

MARK = "@@upgrade-agent-section@@"

# Printed by the interpreter of interest; imports torch only (others by metadata: importing
# sglang or vllm takes seconds and can fail for reasons that are not facts about versions).
PYTHON_PROBE = r"""
import json, sys
out = {"executable": sys.executable, "version": sys.version.split()[0]}
try:
    from importlib import metadata
except ImportError:
    metadata = None
pkgs = {}
for name in ("torch", "triton", "flashinfer-python", "flashinfer", "sgl-kernel", "sglang", "vllm",
             "torchvision", "torchaudio", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cudnn-cu12",
             "nvidia-cudnn-cu13"):
    try:
        pkgs[name] = metadata.version(name)
    except Exception:
        pass
out["packages"] = pkgs
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
except Exception as e:
    out["torch_error"] = f"{type(e).__name__}: {e}"[:300]
print(json.dumps(out))
"""


def _script(cuda_root: str, python: str, disk_paths: list[str]) -> str:
    r = shlex.quote(cuda_root)
    sections = {
        "os": "cat /etc/os-release 2>/dev/null; echo; echo KERNEL=$(uname -srm)",
        "nvidia_smi": "nvidia-smi 2>&1 | head -12",
        "gpus": "nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader,nounits 2>&1",
        "nvcc": "command -v nvcc && nvcc --version 2>&1",
        # The CUDA runfile's installer refuses to run without a host compiler (unless overridden).
        "gcc": "command -v gcc >/dev/null && gcc --version 2>&1 | head -n 1",
        # A third field for symlinks (Ubuntu's /usr/local/cuda-13 -> /etc/alternatives/cuda-13 ->
        # /usr/local/cuda-13.0): where they resolve, so one toolkit is not listed twice.
        # Beside the cuda root, the other places teams keep toolkits (/opt/cuda-13.0, /opt/nvidia/cuda-13.0).
        "toolkits": f"for d in {r}/cuda-* /opt/cuda-* /opt/*/cuda-*; do [ -d \"$d\" ] || continue; v=''; "
                    f"if [ -x \"$d/bin/nvcc\" ]; then v=$(\"$d/bin/nvcc\" --version 2>/dev/null | grep -o 'release [0-9.]*'); fi; "
                    f"t=''; if [ -L \"$d\" ]; then t=$(readlink -f \"$d\"); fi; "
                    f"echo \"$d|$v|$t\"; done",
        "cuda_link": f"if [ -L {r}/cuda ]; then echo link $(readlink {r}/cuda) $(readlink -f {r}/cuda); "
                     f"elif [ -e {r}/cuda ]; then echo dir; else echo none; fi",
        "python": f"{shlex.quote(python)} - <<'PYEOF' 2>&1\n{PYTHON_PROBE}\nPYEOF",
        # The indexes pip would use for this interpreter (its config files and PIP_* variables).
        "pip_config": f"PIP_DISABLE_PIP_VERSION_CHECK=1 {shlex.quote(python)} -m pip config list 2>/dev/null; "
                      "env | grep -E '^(PIP|UV)_(EXTRA_)?INDEX_URL=' || true",
        # One df per path, each row led by the path asked: df prints nothing for a path that does not
        # exist, so rows of one df over several paths would pair with the wrong path.
        "disk": "for p in " + " ".join(shlex.quote(p) for p in disk_paths) + "; do "
                "echo \"$p $(df -P -k \"$p\" 2>/dev/null | tail -n +2 | head -n 1)\"; done",
    }
    # The two slow sections (each starts the interpreter; the probe imports torch, pip its whole CLI) start
    # first, side by side, each into a pipe the shell reads when its turn comes: an inspection takes as long
    # as the slowest of them rather than their sum, and writes no file. Their output is far below a pipe's
    # buffer, so neither waits for its reader. No `set -e`: a failing section prints its error and the
    # next one still runs.
    background = ("python", "pip_config")
    started = "\n".join(f"exec {3 + i}< <(\n{sections[name]}\n)" for i, name in enumerate(background))
    lines = [started]
    for name, cmd in sections.items():
        read = f"cat <&{3 + background.index(name)}" if name in background else cmd
        lines.append(f"echo '{MARK} {name}'\n{read}")
    return "\n".join(lines)


def split_sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


class Driver(BaseModel):
    version: str
    cuda_version: str | None = Field(description="the newest CUDA this driver supports (nvidia-smi header)")
    nvidia_smi_version: str | None = None


class Gpu(BaseModel):
    index: int
    name: str
    compute_capability: str | None
    memory_total_mib: int | None


class Toolkit(BaseModel):
    path: str
    version: str | None
    links: list[str] | None = Field(default=None, description="symlinks of the form <cuda_root>/cuda-* that "
                                                               "resolve to this toolkit, e.g. /usr/local/cuda-13")


class PythonEnv(BaseModel):
    executable: str
    version: str
    torch: str | None = None
    torch_cuda: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    error: str | None = None


class Disk(BaseModel):
    path: str
    mount: str
    free_gib: float
    total_gib: float
    free_bytes: int | None = None  # exact, as df said it (free_gib is rounded to a tenth)


def parse_nvidia_smi_header(text: str) -> Driver | None:
    m = re.search(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?", text)
    if not m:
        return None
    return Driver(nvidia_smi_version=m.group(1), version=m.group(2), cuda_version=m.group(3))


def parse_gpus(text: str) -> list[Gpu]:
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        cc = parts[2] if re.fullmatch(r"\d+\.\d+", parts[2]) else None
        mem = int(parts[3]) if parts[3].isdigit() else None
        gpus.append(Gpu(index=int(parts[0]), name=parts[1], compute_capability=cc, memory_total_mib=mem))
    return gpus


def parse_nvcc(text: str) -> tuple[str | None, str | None]:
    """(release version, build line) from `nvcc --version`."""
    m = re.search(r"release (\d+\.\d+)", text)
    b = re.search(r"^Build (\S+)", text, re.M)
    return (m.group(1) if m else None, b.group(1) if b else None)


class InspectHost(Tool):
    """Inspect a GPU host in one read-only call: driver, CUDA toolkits, GPUs, Python and torch, disk.

    Reports OS and kernel; NVIDIA driver version and the CUDA version the
    driver supports (nvidia-smi header) versus the toolkit on PATH (nvcc --version); every CUDA toolkit
    installed side by side and where the `cuda` symlink points; GPUs (name, compute capability, memory,
    count); the Python environment's torch version, torch.version.cuda, whether CUDA is available, and
    versions of triton, flashinfer, sgl-kernel, sglang, vllm; free disk where installers write; whether the
    host is a Slurm or Kubernetes node (its state, drain and running jobs or pods), as its scheduler says. Missing
    pieces (no GPU, no nvcc) are reported as facts. Call it first, together with your other checks.
    """

    name = "inspect_host"

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        python: str | None = Field(default=None, description="interpreter of interest (default: the host's "
                                                             "configured one, else python3)")

    class Result(BaseModel):
        host: str
        os: str | None
        kernel: str | None
        driver: Driver | None
        gpus: list[Gpu]
        gpu_count: int
        toolkit_on_path: Toolkit | None
        nvcc_build: str | None
        gcc: str | None = Field(None, description="the host compiler's `gcc --version` line; the CUDA runfile "
                                                  "installer refuses without a compiler unless overridden")
        toolkits: list[Toolkit]
        cuda_symlink: str | None = Field(description="where <cuda_root>/cuda points, resolved")
        python: PythonEnv | None
        disk: list[Disk]
        pip_indexes: list[str] = Field(default_factory=list, description="index URLs pip is configured with "
                                                                       "(pip_install uses only the ones it is given)")
        schedulers: list[Scheduler] = Field(default_factory=list, description=(
            "the Slurm or Kubernetes cluster this host is a node of, as its scheduler says (empty: neither "
            "command is installed)"))
        notes: list[str]

    def action(self, args) -> Action:
        return Action(host=args.host, subject=f"inspect_host python={args.python or '(default)'}",
                      risk=Risk(cls=RiskClass.READ_ONLY, rule="tool:inspect_host",
                                reason="reads versions, GPUs and disk space; changes nothing"),
                      interpreter=args.python)

    def run(self, ctx: ToolContext, args) -> "InspectHost.Result":
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        python = args.python or host.spec.python or "python3"
        cuda_root, disk_paths = "/usr/local", ["/tmp", "/usr/local", "/var/tmp"]
        # The scheduler's clients ask their controller over the network, which the read sandbox withholds: they
        # run beside the rest, outside it. The lines are ours (the node's name quoted), never a model's.
        with cf.ThreadPoolExecutor(1) as beside:
            asked = beside.submit(outside_the_sandbox(ctx.hosts, args.host).run, schedulers.script(args.host),
                                  timeout=60, cancel=ctx.cancel)
            r = host.run(_script(cuda_root, python, disk_paths), timeout=120, cancel=ctx.cancel)
        try:
            scheduler = asked.result()
        except HostError:  # said as a client that could not answer would be: nothing read
            scheduler = None
        if r.cancelled:
            raise ToolError(f"inspecting {args.host} was cancelled {ctx.cancel_reason()}: no facts were gathered")
        if r.connection_lost or r.timed_out:
            raise ToolError(f"inspecting {args.host} did not finish: "
                            f"{'connection lost' if r.connection_lost else 'timed out after 120 s'}")
        said = r.stdout + (f"{MARK} scheduler\n{scheduler.stdout}" if scheduler is not None else "")
        return parse_inspection(said, host=args.host, cuda_root=cuda_root, python=python, disk_paths=disk_paths)


def _pip_indexes(section: str) -> list[str]:
    urls: list[str] = []
    for line in section.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(("index-url", "INDEX_URL")):
            urls += [u for u in value.strip().strip("'\"").split() if u not in urls]
    return urls


def parse_inspection(text: str, *, host: str, cuda_root: str, python: str,
                     disk_paths: list[str]) -> InspectHost.Result:
    """The result from the whole output of the inspection script: a pure function, tested on real outputs."""
    s = split_sections(text)
    notes: list[str] = []

    os_name = kernel = None
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', s.get("os", ""), re.M)
    if m:
        os_name = m.group(1)
    m = re.search(r"^KERNEL=(.*)$", s.get("os", ""), re.M)
    if m:
        kernel = m.group(1).strip()

    driver = parse_nvidia_smi_header(s.get("nvidia_smi", ""))
    gpus = parse_gpus(s.get("gpus", "")) if driver else []
    if driver is None:
        first = s.get("nvidia_smi", "").strip().splitlines()[:1]
        notes.append("no NVIDIA driver answered: " + (first[0] if first else "nvidia-smi printed nothing"))

    nvcc_text = s.get("nvcc", "")
    nvcc_version, nvcc_build = parse_nvcc(nvcc_text)
    nvcc_path = nvcc_text.splitlines()[0].strip() if nvcc_text.strip() else None
    toolkit_on_path = Toolkit(path=nvcc_path, version=nvcc_version) if nvcc_version else None
    if toolkit_on_path is None:
        notes.append("no nvcc on PATH")
    gcc = (s.get("gcc", "").strip().splitlines() or [None])[0]
    if gcc is None and "gcc" in s:  # an output recorded before the compiler was asked about says nothing
        notes.append("no gcc on PATH: the CUDA runfile installer refuses to run without a compiler (install one, "
                     "e.g. apt-get install gcc, or install with override)")

    toolkits = []
    links: list[tuple[str, str, str | None]] = []  # (link, where it resolves, version)
    for line in s.get("toolkits", "").splitlines():
        path, _, rest = line.partition("|")
        ver, _, target = rest.partition("|")
        version = ver.replace("release", "").strip() or None
        if not path:
            continue
        if target.strip():
            links.append((path, target.strip(), version))
        else:
            toolkits.append(Toolkit(path=path, version=version))
    for link, target, version in links:
        kit = next((t for t in toolkits if t.path == target), None)
        if kit is not None:
            kit.links = (kit.links or []) + [link]
        else:  # it points outside <cuda_root>/cuda-*: the link is all there is to name it by
            toolkits.append(Toolkit(path=link, version=version))

    link = s.get("cuda_link", "").split()
    cuda_symlink = link[2] if link[:1] == ["link"] and len(link) >= 3 else None
    if link[:1] == ["dir"]:
        notes.append(f"{cuda_root}/cuda is a directory, not a symlink")

    python_env = None
    py_out = s.get("python", "").strip()
    try:
        data = json.loads(py_out.splitlines()[-1]) if py_out else None
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        python_env = PythonEnv(executable=data["executable"], version=data["version"], torch=data.get("torch"),
                               torch_cuda=data.get("torch_cuda"), cuda_available=data.get("cuda_available"),
                               device_count=data.get("device_count"), packages=data.get("packages", {}),
                               error=data.get("torch_error"))
    else:
        notes.append(f"interpreter {python} did not run: {py_out[-200:] or 'no output'}")

    disk = []
    lines = s.get("disk", "").splitlines()
    if lines and lines[0].startswith("Filesystem"):  # recorded by an older version: one df for every path
        pairs = [(path, ln.split()) for path, ln in zip(disk_paths, lines[1:])]
    else:
        pairs = [(path, row.split()) for path, _, row in (ln.partition(" ") for ln in lines)]
    for path, parts in pairs:
        if path in disk_paths and len(parts) >= 6 and parts[3].isdigit():
            disk.append(Disk(path=path, mount=parts[5], free_gib=round(int(parts[3]) / 2**20, 1),
                             total_gib=round(int(parts[1]) / 2**20, 1), free_bytes=int(parts[3]) * 1024))

    if toolkit_on_path is None and cuda_symlink:
        linked = next((t for t in toolkits if t.path == cuda_symlink and t.version), None)
        if linked is not None:
            notes.append(f"{cuda_root}/cuda/bin/nvcc is there (release {linked.version}, {cuda_symlink}) but not "
                         f"on PATH: commands run with a clean PATH; put {cuda_root}/cuda/bin in the host's "
                         f"path_prefix or call nvcc by its full path")
    if python_env and python_env.torch and "+" in python_env.torch:
        public, _, tag = python_env.torch.partition("+")
        if python_env.packages.get("torch") == public:
            notes.append(f"torch reports {python_env.torch} but pip lists it as torch=={public}: a wheel from "
                         f"PyPI, whose version does not name its CUDA build ({tag}); torch=={python_env.torch} "
                         f"exists only on the index that names it (e.g. https://download.pytorch.org/whl/{tag})")
    if driver and driver.cuda_version and nvcc_version and driver.cuda_version != nvcc_version:
        notes.append(f"the driver supports CUDA {driver.cuda_version}; the toolkit on PATH is {nvcc_version}")
    if python_env and python_env.torch_cuda and nvcc_version and \
            python_env.torch_cuda.split(".")[0] != nvcc_version.split(".")[0]:
        notes.append(f"torch is built for CUDA {python_env.torch_cuda} but nvcc on PATH is {nvcc_version}")
    found = schedulers.parse(s.get("scheduler", ""))
    notes += [schedulers.note(one) for one in found]
    return InspectHost.Result(host=host, os=os_name, kernel=kernel, driver=driver, gpus=gpus, gpu_count=len(gpus),
                              toolkit_on_path=toolkit_on_path, nvcc_build=nvcc_build, gcc=gcc, toolkits=toolkits,
                              cuda_symlink=cuda_symlink, python=python_env, disk=disk,
                              pip_indexes=_pip_indexes(s.get("pip_config", "")), schedulers=found, notes=notes)
