"""ldd of the simulated host: the C library's version is the sim's Ubuntu's (its dpkg lists libc-bin at it),
while what a program links against is listed by this machine's ldd, as the sim's programs are this machine's."""

from __future__ import annotations

import sys

from simhost import gnu
from simhost.dpkg import _LIBC

_VERSION = """ldd (Ubuntu GLIBC {full}) {short}
Copyright (C) 2024 Free Software Foundation, Inc.
This is free software; see the source for copying conditions.  There is NO
warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.
Written by Roland McGrath and Ulrich Drepper.
"""


def ldd_main(argv: list[str], root) -> int:
    if argv[:1] == ["--version"]:
        sys.stdout.write(_VERSION.format(full=_LIBC, short=_LIBC.split("-")[0]))
        return 0
    return gnu.host_program("ldd", argv)
