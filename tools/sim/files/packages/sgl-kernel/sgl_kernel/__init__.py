"""sgl_kernel of the simulated GPU host.

A real sgl-kernel wheel links against the CUDA runtime its torch was built with; importing a
build for one CUDA major under a torch for another fails in the dynamic loader. The same failure
is raised here when this build's CUDA does not match torch's.
"""

from ._build import CUDA as _BUILT_FOR

__version__ = "0.3.21"


def _check_runtime() -> None:
    import torch

    mine, torchs = _BUILT_FOR.split(".")[0], (torch.version.cuda or "").split(".")[0]
    if mine != torchs:
        raise ImportError(f"libcudart.so.{mine}: cannot open shared object file: No such file or directory")


_check_runtime()
