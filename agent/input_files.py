"""The files an operator gives the product (goal file, recipe, inventory, settings), read within bounds.

A size taken from stat() says nothing of a device or a FIFO: /dev/zero reports 0 bytes and never ends, a
FIFO blocks until someone writes. So only a regular file is read, and never more than its limit, however
it grows while it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class InputFileError(ValueError):
    """A one-line reason the file cannot be read as it is; each loader words it as its own error."""


def read_text_file(path: Path, limit: int, what: str) -> str:
    """The file's text (UTF-8), at most `limit` bytes; InputFileError saying why not."""
    try:
        # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputFileError(f"{path}: cannot read the {what}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device, a FIFO or a socket"
            raise InputFileError(f"{path}: {kind}, not a file: give the {what} itself")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise InputFileError(f"{path}: cannot read the {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputFileError(f"{path}: larger than a {what} can be (the limit is {limit // 1024:,} KiB): is it the "
                             "right file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputFileError(f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x}); save the {what} as UTF-8") \
            from None
