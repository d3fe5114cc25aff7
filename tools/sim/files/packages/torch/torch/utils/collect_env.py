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


def _os_name():
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return fields["PRETTY_NAME"].strip('"')
    except (OSError, KeyError):
        return platform.system()


def _platform(st):
    """platform.platform() as the host's kernel makes it: the simulated host's kernel, not the sandbox's."""
    kernel = st.get("kernel") or {}
    release = kernel.get("release") or platform.release()
    libc = "".join(platform.libc_ver())
    return f"Linux-{release}-{platform.machine()}-with-{libc}"


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
        f"OS: {_os_name()} ({platform.machine()})",
        f"Python version: {sys.version.split()[0]} (64-bit runtime)",
        f"Python platform: {_platform(st)}",
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
