"""Commands of the simulated host that are not part of its installer.

The runfile carries simhost/*.py, and its checksum is published in the sim's mirror as NVIDIA publishes a
release's: it changes only with the installer. What the host shows beside it lives here, copied into the
sim's lib at build as simhost is.
"""
