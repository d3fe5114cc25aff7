"""vllm of the simulated GPU host: `vllm bench serve` and `vllm --version`."""

from .version import __version__  # noqa: F401
