"""torch.utils.cpp_extension: finding the CUDA toolkit and checking it against this torch build.

The same search order and the same messages as the real module: CUDA_HOME, CUDA_PATH, the nvcc on
PATH, then /usr/local/cuda (of the simulated machine). JIT builders (flashinfer) call
`check_cuda_version()` before compiling, which is where a toolkit that does not match torch fails.
"""

import os
import re
import shutil
import subprocess
import warnings

from .. import _sim_host
from .. import version as _version

CUDA_MISMATCH_MESSAGE = """
The detected CUDA version ({0}) mismatches the version that was used to compile
PyTorch ({1}). Please make sure to use the same CUDA versions.
"""

CUDA_MISMATCH_WARN = ("The detected CUDA version ({0}) has a minor version mismatch with the version that was used "
                      "to compile PyTorch ({1}). Most likely this shouldn't be a problem.")


def _find_cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    root, _ = _sim_host.host()
    nvcc = shutil.which("nvcc")
    # An nvcc outside the simulated machine belongs to the computer running it, not to this host.
    if nvcc is not None and root is not None and os.path.realpath(nvcc).startswith(str(root) + os.sep):
        return os.path.dirname(os.path.dirname(nvcc))
    if root is not None:
        default = os.path.join(str(root), "usr", "local", "cuda")
        if os.path.exists(default):
            return default
    return None


CUDA_HOME = _find_cuda_home()


def check_cuda_version():
    """What the real _check_cuda_version does before building an extension."""
    if CUDA_HOME is None:
        raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc")
    out = subprocess.check_output([nvcc, "-V"]).decode()
    found = re.search(r"release (\d+[.]\d+)", out)
    if found is None:
        raise RuntimeError(f"Could not parse the CUDA version from {nvcc} -V")
    detected = found.group(1)
    if _version.cuda is None or detected == _version.cuda:
        return detected
    if detected.split(".")[0] != _version.cuda.split(".")[0]:
        raise RuntimeError(CUDA_MISMATCH_MESSAGE.format(detected, _version.cuda))
    warnings.warn(CUDA_MISMATCH_WARN.format(detected, _version.cuda))
    return detected
