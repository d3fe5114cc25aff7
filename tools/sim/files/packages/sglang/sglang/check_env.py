"""python -m sglang.check_env: versions of the stack and what CUDA sees."""

import importlib.metadata as md
import os
import subprocess
import sys

import torch
from torch.utils import cpp_extension


def _version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "Module Not Found"


def main():
    st = torch._sim_host.state() or {}
    available = torch.cuda.is_available()
    lines = [f"Python: {sys.version}", f"CUDA available: {available}"]
    if available:
        for g in st.get("gpus", []):
            lines.append(f"GPU {g['index']}: {g['name']}")
            lines.append(f"GPU {g['index']} Compute Capability: {g['compute_cap']}")
    home = cpp_extension.CUDA_HOME
    lines.append(f"CUDA_HOME: {home}")
    nvcc = "Not Available"
    if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        out = subprocess.check_output([os.path.join(home, "bin", "nvcc"), "-V"]).decode()
        nvcc = [line for line in out.splitlines() if "release" in line][0]
    lines.append(f"NVCC: {nvcc}")
    lines.append(f"CUDA Driver Version: {st.get('driver', {}).get('version', 'N/A')}")
    lines.append(f"PyTorch: {torch.__version__}")
    for dist in ("sglang", "sgl_kernel", "flashinfer_python", "triton", "vllm"):
        lines.append(f"{dist}: {_version(dist.replace('_', '-'))}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
