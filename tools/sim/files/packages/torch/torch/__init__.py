"""torch of the simulated GPU host.

Real in its packaging (version, local CUDA tag, dependencies) and in what people check after an
upgrade: torch.__version__, torch.version.cuda, torch.cuda.* and torch.backends.cudnn, answered
from the simulated machine this installation lives in. It computes nothing.
"""

from . import version
from .version import __version__
from . import cuda, backends, utils
from ._tensor import Tensor, device, ones, tensor, zeros

__all__ = ["__version__", "version", "cuda", "backends", "utils", "Tensor", "device", "zeros", "ones", "tensor",
           "get_num_threads", "OutOfMemoryError"]


class OutOfMemoryError(RuntimeError):
    """What an allocation past the GPU's memory raises (torch.cuda.OutOfMemoryError is the same class)."""


def get_num_threads():
    """Threads of intra-op parallelism: one per core this process may run on, as torch defaults to."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


cuda.OutOfMemoryError = OutOfMemoryError
