"""flashinfer.jit: kernels are compiled on first use with the toolkit torch finds (CUDA_HOME)."""


def prepare_toolkit() -> str:
    """Check the toolkit the JIT would compile with; returns its CUDA version ("13.0")."""
    from torch.utils import cpp_extension

    return cpp_extension.check_cuda_version()
