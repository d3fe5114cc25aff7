"""python -m torch.utils.collect_env, the parts people read."""

import platform
import sys

import torch
from torch.utils import cpp_extension


def _nvcc_line():
    import subprocess

    if cpp_extension.CUDA_HOME is None:
        return "Could not collect"
    try:
        out = subprocess.check_output([cpp_extension.CUDA_HOME + "/bin/nvcc", "--version"]).decode()
    except OSError:
        return "Could not collect"
    return [line for line in out.splitlines() if "release" in line][0]


def main():
    st = torch._sim_host.state() or {}
    gpus = st.get("gpus", [])
    driver = st.get("driver", {})
    available = torch.cuda.is_available()
    lines = [
        "Collecting environment information...",
        f"PyTorch version: {torch.__version__}",
        "Is debug build: False",
        f"CUDA used to build PyTorch: {torch.version.cuda}",
        "ROCM used to build PyTorch: N/A",
        "",
        f"OS: {platform.system()}",
        f"Python version: {sys.version.split()[0]} (64-bit runtime)",
        f"Is CUDA available: {available}",
        f"CUDA runtime version: {_nvcc_line().split('V')[-1] if available else 'Could not collect'}",
        "GPU models and configuration: ",
        *[f"GPU {g['index']}: {g['name']}" for g in gpus],
        "",
        f"Nvidia driver version: {driver.get('version', 'Could not collect')}",
        f"cuDNN version: {torch.backends.cudnn.version()}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
