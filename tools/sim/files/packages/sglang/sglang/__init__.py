"""sglang of the simulated GPU host: its benchmarks and check_env, answered from the simulated machine."""

from .version import __version__  # noqa: F401
