"""flashinfer of the simulated GPU host: its JIT is where a toolkit that does not match torch fails."""

__version__ = "0.6.4"

from . import jit  # noqa: E402,F401
