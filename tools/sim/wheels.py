"""The sim's Python packages: real wheel files and the PEP 503 indexes that serve them.

Each wheel is a zip with METADATA, WHEEL, RECORD and entry points, so pip installs, freezes and
uninstalls it like any other. The code inside is small (tools/sim/files/packages); what matters
is the packaging: torch 2.10.0 with a +cu128 and a +cu130 build, each pulling the NCCL and CUDA
runtime wheels of its CUDA major, and the kernel packages built per CUDA.

Three indexes, like the real ones: `simple` stands for PyPI (its torch is the cu128 build),
`simple-cu128` and `simple-cu130` for download.pytorch.org/whl/cu128 and /cu130.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import shutil
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path

PACKAGES = Path(__file__).parent / "files" / "packages"
GENERATOR = "upgrade-agent-sim (0.1.0)"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed zip timestamps: identical inputs give identical wheels


@dataclass(frozen=True)
class Variant:
    tag: str  # "cu128"
    cuda: str  # "12.8"
    nccl_dist: str
    nccl: str
    runtime_dist: str
    runtime: str
    lib_dir: str  # where the NVIDIA wheels of this CUDA major put their libraries
    cudnn: int
    arch_list: tuple[str, ...]

    @property
    def major(self) -> str:
        return self.cuda.split(".")[0]


VARIANTS = {
    "cu128": Variant("cu128", "12.8", "nvidia-nccl-cu12", "2.27.5", "nvidia-cuda-runtime-cu12", "12.8.90",
                     "nvidia/{pkg}/lib", 91002,
                     ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")),
    "cu130": Variant("cu130", "13.0", "nvidia-nccl-cu13", "2.28.9", "nvidia-cuda-runtime", "13.0.96",
                     "nvidia/cu13/lib", 91300,
                     ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_110", "sm_120")),
}

TORCH = "2.10.0"
SGL_KERNEL = "0.3.21"


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    summary: str
    source: str | None = None  # directory under files/packages with the importable code
    generated: tuple[tuple[str, str], ...] = ()  # (path in the wheel, text)
    requires: tuple[str, ...] = ()
    console_scripts: tuple[tuple[str, str], ...] = ()
    requires_python: str = ">=3.10"

    @property
    def filename(self) -> str:
        return f"{_wheel_name(self.name)}-{self.version}-py3-none-any.whl"


def catalog(variant: Variant) -> list[Dist]:
    """Every distribution one CUDA variant of the index offers."""
    v = variant
    torch_version = f"{TORCH}+{v.tag}"
    torch_py = (f'__version__ = "{torch_version}"\n'
                f'cuda = "{v.cuda}"\n'
                'hip = None\n'
                'debug = False\n'
                f'git_version = "{hashlib.sha1(torch_version.encode()).hexdigest()}"\n'
                f'_nccl = "{v.nccl}"\n'
                f'_cudnn = {v.cudnn}\n'
                f'_arch_list = {list(v.arch_list)!r}\n')
    nccl_dir = v.lib_dir.format(pkg="nccl")
    runtime_dir = v.lib_dir.format(pkg="cuda_runtime")
    return [
        Dist("torch", torch_version, "Tensors and Dynamic neural networks in Python with strong GPU acceleration",
             source="torch", generated=(("torch/version.py", torch_py),),
             requires=("triton==3.6.0", f"{v.nccl_dist}=={v.nccl}", f"{v.runtime_dist}=={v.runtime}"),
             console_scripts=(("torchrun", "torch.distributed.run:main"),)),
        Dist("triton", "3.6.0", "A language and compiler for custom Deep Learning operations", source="triton"),
        Dist(v.nccl_dist, v.nccl, "NVIDIA Collective Communication Library (NCCL) Runtime", requires_python=">=3",
             generated=((f"{nccl_dir}/libnccl.so.2", f"NCCL {v.nccl} for CUDA {v.major} (placeholder)\n"),)),
        Dist(v.runtime_dist, v.runtime, "CUDA Runtime native Libraries", requires_python=">=3",
             generated=((f"{runtime_dir}/libcudart.so.{v.major}", f"cudart {v.runtime} (placeholder)\n"),)),
        Dist("flashinfer-python", "0.6.4", "FlashInfer: Kernel Library for LLM Serving", source="flashinfer-python",
             requires=("torch",)),
        Dist("sgl-kernel", f"{SGL_KERNEL}+{v.tag}", "Kernel Library for SGLang", source="sgl-kernel",
             generated=(("sgl_kernel/_build.py", f'CUDA = "{v.cuda}"\n'),), requires=("torch",)),
        Dist("sglang", "0.5.9", "SGLang is a fast serving framework for large language models and vision language models.",
             source="sglang", requires=("torch==2.10.0", f"sgl-kernel=={SGL_KERNEL}", "flashinfer-python==0.6.4")),
        Dist("vllm", "0.16.0", "A high-throughput and memory-efficient inference and serving engine for LLMs",
             source="vllm", requires=("torch==2.10.0", "flashinfer-python==0.6.4"),
             console_scripts=(("vllm", "vllm.entrypoints.cli.main:main"),)),
    ]


def build_wheel(dist: Dist, out_dir: Path) -> Path:
    """Write dist's wheel into out_dir; byte-identical for identical inputs."""
    files: dict[str, bytes] = {}
    if dist.source is not None:
        base = PACKAGES / dist.source
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files[path.relative_to(base).as_posix()] = path.read_bytes()
    for name, text in dist.generated:
        files[name] = text.encode()
    info = f"{_wheel_name(dist.name)}-{dist.version}.dist-info"
    files[f"{info}/METADATA"] = _metadata(dist).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n\n").encode()
    if dist.console_scripts:
        files[f"{info}/entry_points.txt"] = ("[console_scripts]\n" + "".join(
            f"{name} = {target}\n" for name, target in dist.console_scripts) + "\n").encode()
    tops = sorted({n.split("/")[0] for n in files if not n.startswith(info)})
    files[f"{info}/top_level.txt"] = "".join(f"{t}\n" for t in tops if not t.endswith(".py")).encode()
    record = [f"{name},sha256={_b64_digest(data)},{len(data)}" for name, data in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / dist.filename
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        # dist-info last, as wheel builders do: RECORD describes everything before it.
        for name in sorted(files, key=lambda n: (n.startswith(info), n)):
            zi = zipfile.ZipInfo(name, _EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, files[name])
    target.write_bytes(buf.getvalue())
    return target


def build_indexes(out: Path) -> dict[str, Path]:
    """Build every wheel and the three simple indexes under `out`; returns {name: index dir}."""
    indexes = {"simple": VARIANTS["cu128"], "simple-cu128": VARIANTS["cu128"], "simple-cu130": VARIANTS["cu130"]}
    result = {}
    for index_name, variant in indexes.items():
        index_dir = out / index_name
        projects: dict[str, list[Path]] = {}
        for dist in catalog(variant):
            project = normalize(dist.name)
            wheel = build_wheel(dist, index_dir / project)
            projects.setdefault(project, []).append(wheel)
        write_simple_index(index_dir, projects)
        result[index_name] = index_dir
    return result


def write_simple_index(index_dir: Path, projects: dict[str, list[Path]]) -> None:
    """Write the PEP 503 pages of a file:// index: index.html, and PROJECT/index.html for each project's wheels
    (which lie in index_dir/PROJECT/). pip reads a directory URL's index.html, so `--index-url file:///DIR`
    works with no server."""
    for project, wheels in projects.items():
        links = "".join(
            f'    <a href="{urllib.parse.quote(w.name)}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}"'
            f' data-requires-python="{html.escape(_requires_python(w), quote=True)}">{html.escape(w.name)}</a><br/>\n'
            for w in sorted(wheels))
        (index_dir / project / "index.html").write_text(
            f"<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>Links for {project}</title></head>\n  <body>\n    <h1>Links for {project}</h1>\n{links}"
            "  </body>\n</html>\n")
    body = "".join(f'    <a href="{p}/">{p}</a><br/>\n' for p in sorted(projects))
    (index_dir / "index.html").write_text(
        "<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
        f"<title>Simple index</title></head>\n  <body>\n{body}  </body>\n</html>\n")


def wheel_index(wheels: list[Path], index_dir: Path) -> Path:
    """A file:// simple index of the given wheel files (copied into index_dir); returns index_dir."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        project = normalize(wheel.name.split("-")[0])
        target = index_dir / project / wheel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel, target)
        projects.setdefault(project, []).append(target)
    write_simple_index(index_dir, projects)
    return index_dir


def copy_indexes(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, dirs_exist_ok=True)


def normalize(name: str) -> str:
    """PEP 503 project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name)


def _metadata(dist: Dist) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {dist.name}", f"Version: {dist.version}", f"Summary: {dist.summary}",
             "License: Proprietary placeholder of the simulated GPU host", f"Requires-Python: {dist.requires_python}"]
    lines += [f"Requires-Dist: {r}" for r in dist.requires]
    return "\n".join(lines) + "\n\n"


def _requires_python(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(meta).decode().splitlines():
            if line.startswith("Requires-Python: "):
                return line.split(": ", 1)[1]
    return ""


def _b64_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


__all__ = ["VARIANTS", "Variant", "Dist", "catalog", "build_wheel", "build_indexes", "copy_indexes", "normalize"]
