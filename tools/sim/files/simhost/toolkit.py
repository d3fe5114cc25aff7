"""CUDA toolkits: the releases the sim knows and the directory layout a runfile leaves behind.

A toolkit directory looks like /usr/local/cuda-X.Y on a real machine: bin/ with nvcc and friends
(scripts that print the real version banners), targets/x86_64-linux/{lib,include} with lib64 and
include pointing at them, placeholder shared objects with the real sonames, and version.json.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Release:
    version: str  # "13.0.1"
    driver: str  # the driver bundled in the runfile
    nvcc: str  # "13.0.88": the V-number nvcc prints
    built_on: str  # nvcc's "Built on" stamp
    build: str  # nvcc's "Build" line
    cudart: str
    cublas: str
    tmp_need_bytes: int  # what the installer wants free in its temp dir
    install_need_bytes: int  # what it wants free where the toolkit goes
    libraries: tuple[str, ...] = field(default=("cudart", "cublas", "cublasLt", "nvrtc", "cufft", "curand",
                                                 "cusparse", "cusolver", "nvJitLink", "cupti"))

    @property
    def short(self) -> str:  # "13.0"
        return ".".join(self.version.split(".")[:2])

    @property
    def major(self) -> str:
        return self.version.split(".")[0]

    @property
    def runfile_name(self) -> str:
        return f"cuda_{self.version}_{self.driver}_linux.run"


RELEASES: dict[str, Release] = {
    "12.8": Release("12.8.1", "570.124.06", "12.8.93", "Fri_Feb_21_20:23:50_PST_2025",
                    "cuda_12.8.r12.8/compiler.35583870_0", "12.8.90", "12.8.4.1",
                    tmp_need_bytes=9_014_706_176, install_need_bytes=7_526_133_760),
    "13.0": Release("13.0.1", "580.82.07", "13.0.88", "Wed_Aug_20_01:57:39_PM_PDT_2025",
                    "cuda_13.0.r13.0/compiler.36424714_0", "13.0.88", "13.0.2.14",
                    tmp_need_bytes=8_633_061_376, install_need_bytes=7_152_115_712),
    "13.1": Release("13.1.1", "590.48.01", "13.1.115", "Tue_Dec_16_07:23:41_PM_PST_2025",
                    "cuda_13.1.r13.1/compiler.37061995_0", "13.1.80", "13.2.0.9",
                    tmp_need_bytes=8_764_416_000, install_need_bytes=7_263_797_248),
}


def nvcc_banner(r: Release) -> str:
    return ("nvcc: NVIDIA (R) Cuda compiler driver\n"
            f"Copyright (c) 2005-{_year(r)} NVIDIA Corporation\n"
            f"Built on {r.built_on}\n"
            f"Cuda compilation tools, release {r.short}, V{r.nvcc}\n"
            f"Build {r.build}\n")


def ptxas_banner(r: Release) -> str:
    return nvcc_banner(r).replace("nvcc: NVIDIA (R) Cuda compiler driver", "ptxas: NVIDIA (R) Ptx optimizing assembler")


def _year(r: Release) -> str:
    return r.built_on.rsplit("_", 1)[-1]


def version_json(r: Release) -> dict:
    """version.json as a real toolkit ships it (a subset of its components)."""
    lib = lambda name, version: {"name": name, "version": version}  # noqa: E731
    return {
        "cuda": lib("CUDA SDK", r.version),
        "cuda_cccl": lib("CUDA C++ Core Compute Libraries", r.cudart),
        "cuda_cudart": lib("CUDA Runtime (cudart)", r.cudart),
        "cuda_cuobjdump": lib("cuobjdump", r.cudart),
        "cuda_cupti": lib("CUPTI", r.cudart),
        "cuda_nvcc": lib("CUDA NVCC", r.nvcc),
        "cuda_nvdisasm": lib("cuda nvdisasm", r.cudart),
        "cuda_nvrtc": lib("CUDA NVRTC", r.nvcc),
        "libcublas": lib("CUDA cuBLAS", r.cublas),
        "nvidia_driver": lib("NVIDIA Linux Driver", r.driver),
    }


def read_version(toolkit_dir: str | os.PathLike) -> str | None:
    """The release ("12.8.1") of the toolkit in a directory, or None when there is none."""
    try:
        with open(Path(toolkit_dir) / "version.json", encoding="utf-8") as f:
            return json.load(f)["cuda"]["version"]
    except (OSError, ValueError, KeyError):
        return None


# --------------------------------------------------------------------------- layout

_NVCC = '''#!{python} -IS
"""nvcc of a simulated CUDA {short} toolkit: it reports its version and compiles nothing."""
import sys

BANNER = {banner!r}
ARCHS = {archs!r}

args = sys.argv[1:]
if any(a in ("--version", "-V") for a in args):
    sys.stdout.write(BANNER)
    sys.exit(0)
if "--list-gpu-arch" in args or "-arch-ls" in args:
    sys.stdout.write("\\n".join("compute_" + a for a in ARCHS) + "\\n")
    sys.exit(0)
if "--list-gpu-code" in args or "-code-ls" in args:
    sys.stdout.write("\\n".join("sm_" + a for a in ARCHS) + "\\n")
    sys.exit(0)
if not [a for a in args if not a.startswith("-")]:
    sys.stderr.write("nvcc fatal   : No input files specified; use option --help for more information\\n")
    sys.exit(1)
sys.stderr.write("nvcc fatal   : this simulated toolkit has no compiler; only --version and --list-gpu-* work\\n")
sys.exit(1)
'''

_TOOL = '''#!{python} -IS
import sys
if any(a in ("--version", "-V") for a in sys.argv[1:]):
    sys.stdout.write({banner!r})
    sys.exit(0)
sys.stderr.write({name!r} + " fatal   : this simulated toolkit only reports its version\\n")
sys.exit(1)
'''

_UNINSTALLER = '''#!{python} -IS
"""cuda-uninstaller of a simulated toolkit: with --silent, removes the toolkit it belongs to."""
import os, shutil, sys, time
toolkit = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
if "--silent" not in sys.argv[1:]:
    sys.stdout.write("Error opening terminal: unknown.\\n")
    sys.exit(1)
root = toolkit
while root != "/" and not os.path.isfile(os.path.join(root, ".sim", "state.json")):
    root = os.path.dirname(root)
log = os.path.join(root, "var", "log", "cuda-uninstaller.log")
os.makedirs(os.path.dirname(log), exist_ok=True)
with open(log, "a") as f:
    f.write("[INFO]: Uninstalling: CUDA Toolkit {short}\\n[INFO]: Removing: " + toolkit + "\\n")
shutil.rmtree(toolkit)
sys.exit(0)
'''

# Architectures nvcc lists: CUDA 13 dropped Maxwell, Pascal and Volta.
_ARCHS = {"12": ["50", "52", "53", "60", "61", "62", "70", "72", "75", "80", "86", "87", "89", "90", "100", "101",
                 "120"],
          "13": ["75", "80", "86", "87", "88", "89", "90", "100", "103", "110", "120", "121"]}


def install(dest: Path, r: Release, python: str, *, man_dir: Path | None = None) -> list[str]:
    """Lay out a toolkit of release `r` at `dest`; returns the components logged as installed."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "targets" / "x86_64-linux"
    (target / "lib").mkdir(parents=True, exist_ok=True)
    (target / "include").mkdir(parents=True, exist_ok=True)
    for link, to in (("lib64", "targets/x86_64-linux/lib"), ("include", "targets/x86_64-linux/include")):
        _symlink(to, dest / link)
    bin_dir = dest / "bin"
    bin_dir.mkdir(exist_ok=True)
    _script(bin_dir / "nvcc", _NVCC.format(python=python, short=r.short, banner=nvcc_banner(r),
                                            archs=_ARCHS.get(r.major, _ARCHS["13"])))
    for tool in ("ptxas", "cuobjdump", "nvdisasm", "nvlink", "fatbinary"):
        banner = ptxas_banner(r) if tool == "ptxas" else nvcc_banner(r).replace(
            "nvcc: NVIDIA (R) Cuda compiler driver", f"{tool}: NVIDIA (R) {tool}")
        _script(bin_dir / tool, _TOOL.format(python=python, banner=banner, name=tool))
    _script(bin_dir / "cuda-uninstaller", _UNINSTALLER.format(python=python, short=r.short))
    (bin_dir / "nvcc.profile").write_text(
        "\nTOP              = $(_HERE_)/..\n\nCICC_PATH        = $(TOP)/nvvm/bin\n"
        "NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice\n\nLD_LIBRARY_PATH += $(TOP)/lib:\n"
        "PATH            += $(CICC_PATH):$(_HERE_):\n\nINCLUDES        +=  \"-I$(TOP)/$(_TARGET_DIR_)/include\" $(_SPACE_)\n"
        "LIBRARIES        =+ $(_SPACE_) \"-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs\" "
        "\"-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)\"\n\nCUDAFE_FLAGS    +=\nPTXAS_FLAGS     +=\n")
    (dest / "nvvm" / "bin").mkdir(parents=True, exist_ok=True)
    _placeholder_elf(dest / "nvvm" / "bin" / "cicc")
    major, minor = r.short.split(".")
    numeric = int(major) * 1000 + int(minor) * 10
    (target / "include" / "cuda.h").write_text(f"/* CUDA driver API header (placeholder) */\n#define CUDA_VERSION {numeric}\n")
    (target / "include" / "cuda_runtime_api.h").write_text(
        f"/* CUDA runtime API header (placeholder) */\n#define CUDART_VERSION {numeric}\n")
    versions = {"cudart": r.cudart, "cublas": r.cublas, "cublasLt": r.cublas}
    installed = [f"CUDA Toolkit {r.short}", f"CUDA Libraries {r.short}", f"CUDA Development {r.short}"]
    for lib in r.libraries:
        version = versions.get(lib, r.cudart)
        soname_major = version.split(".")[0] if lib in ("cudart", "cublas", "cublasLt", "nvrtc", "nvJitLink") else major
        real = target / "lib" / f"lib{lib}.so.{version}"
        _placeholder_elf(real)
        _symlink(real.name, target / "lib" / f"lib{lib}.so.{soname_major}")
        _symlink(f"lib{lib}.so.{soname_major}", target / "lib" / f"lib{lib}.so")
        installed.append(f"lib{lib.lower()}-dev")
    (target / "lib" / "stubs").mkdir(exist_ok=True)
    _placeholder_elf(target / "lib" / "stubs" / "libcuda.so")
    with open(dest / "version.json", "w", encoding="utf-8") as f:
        json.dump(version_json(r), f, indent=3, separators=(",", " : "))
        f.write("\n")
    (dest / "EULA.txt").write_text("End User License Agreement (placeholder of the simulated toolkit)\n")
    if man_dir is not None:
        (man_dir / "man1").mkdir(parents=True, exist_ok=True)
        (man_dir / "man1" / f"nvcc-{r.short}.1").write_text(f".TH NVCC 1 \"\" \"CUDA {r.short}\"\n")
    return installed


def remove(dest: Path) -> None:
    shutil.rmtree(dest)


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _placeholder_elf(path: Path) -> None:
    # The ELF magic, so `file` and loaders see a shared object's signature; nothing loads it.
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"simulated CUDA component\n")


def _symlink(to: str, link: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(to)
