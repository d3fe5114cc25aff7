"""The SGLang server the benchmarks talk to, started from this environment.

A real server imports torch, initialises CUDA, loads sgl_kernel and JIT-compiles flashinfer
kernels with the toolkit CUDA_HOME points at. Any of these can fail after an upgrade; they fail
here the same way, with the same exceptions, before a single number is produced.
"""

import torch


def start(model=None, tp_size=None, quantization=None):
    """Bring the stack up and load `model` (default: the one the host serves) over `tp_size` GPUs (default: all)
    with `quantization`; returns (sim root, single-stream decode tok/s for this run). Weights that do not fit the
    GPUs fail as they do when loaded."""
    torch.cuda._lazy_init()
    import flashinfer  # noqa: F401
    import sgl_kernel  # noqa: F401

    flashinfer.jit.prepare_toolkit()
    root, _ = torch._sim_host.host()
    from simcommands import serving

    try:
        return root, serving.load(root, torch, model, tp_size, quantization)
    except (torch.OutOfMemoryError, ValueError) as e:
        raise e.with_traceback(None) from None  # from the loader, as a real server's traceback ends
