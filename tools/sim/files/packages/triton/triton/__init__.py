"""triton of the simulated GPU host: a version and nothing else."""

__version__ = "3.6.0"
