"""The SGLang server the benchmarks talk to, started from this environment.

A real server imports torch, initialises CUDA, loads sgl_kernel and JIT-compiles flashinfer
kernels with the toolkit CUDA_HOME points at. Any of these can fail after an upgrade; they fail
here the same way, with the same exceptions, before a single number is produced.
"""

import torch


def start():
    """Bring the stack up; returns (sim root, single-stream decode tok/s for this run)."""
    torch.cuda._lazy_init()
    import flashinfer  # noqa: F401
    import sgl_kernel  # noqa: F401

    flashinfer.jit.prepare_toolkit()
    root, simhost = torch._sim_host.host()
    return root, simhost.perf.decode_tok_s(root, torch.version.cuda)
