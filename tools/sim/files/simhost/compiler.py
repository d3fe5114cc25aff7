"""The simulated host's C compiler: there when its state names one, absent when it is null.

The state's `gcc` is the last line of `gcc -v` ("gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) ").
With a compiler, the sim's /usr/bin holds gcc, g++ and cpp under Ubuntu's names (gcc -> gcc-13 ->
x86_64-linux-gnu-gcc-13, cc -> gcc, c++ -> g++); each answers --version, -v, -dumpversion and
-dumpfullversion as the configured compiler does, and hands any other use to this machine's
compiler. Without one, no compiler name of this machine shows through the sim's /usr/bin.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from . import state as host_state

# Inside the sim's sandbox this machine's own programs are here (the sim's /usr/bin links to them).
HOST_USR_BIN = "/.host/usr/bin"
TRIPLET = "x86_64-linux-gnu"

# Every name a GCC toolchain installs in /usr/bin, with or without the triplet and the major suffix.
_FAMILY_NAME = re.compile(rf"^(?:{TRIPLET}-)?(?P<tool>gcc|g\+\+|cpp|gcov|gcov-dump|gcov-tool|lto-dump|gcc-ar|gcc-nm"
                          r"|gcc-ranlib)(?:-(?P<major>\d+))?$")
# The generic names that point at whichever C and C++ compiler is installed.
_GENERIC = {"cc": "gcc", "c++": "g++", "c89": "gcc", "c99": "gcc", "c89-gcc": "gcc", "c99-gcc": "gcc"}
# The drivers the sim answers for itself; the other tools of the family are this machine's.
_DRIVERS = ("gcc", "g++", "cpp")


@dataclass(frozen=True)
class Compiler:
    version: str  # "13.3.0"
    pkgversion: str  # "Ubuntu 13.3.0-6ubuntu2~24.04", or "GCC" for a compiler built by hand

    @property
    def major(self) -> str:
        return self.version.split(".")[0]

    @property
    def package_version(self) -> str | None:
        """The Debian version of the distribution's gcc packages; None when no package built it."""
        vendor, _, version = self.pkgversion.partition(" ")
        return version if vendor in ("Ubuntu", "Debian") and version else None

    def v_line(self) -> str:
        return f"gcc version {self.version} ({self.pkgversion}) "


def parse(text: str | None) -> Compiler | None:
    """The compiler a state's `gcc` names; ValueError with the expected form when it names none."""
    if text is None:
        return None
    version = re.search(r"\b(\d+\.\d+\.\d+)\b", text)
    if not version:
        raise ValueError(f"gcc {text!r} names no compiler version: give the last line of `gcc -v`, e.g. "
                         f"'gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)', or null for no compiler")
    pkg = re.search(r"\(([^()]+)\)", text)
    return Compiler(version.group(1), pkg.group(1).strip() if pkg else "GCC")


def is_compiler_name(name: str) -> bool:
    """Whether a program of this machine's /usr/bin belongs to its C compiler (and must follow the sim's)."""
    return name in _GENERIC or _FAMILY_NAME.match(name) is not None


def shown_from_host(name: str, compiler: Compiler | None) -> bool:
    """Whether the sim's /usr/bin links to this machine's program `name`: everything but the compiler,
    and of the compiler's family only the unversioned helpers (gcov, gcc-ar...) when one is configured."""
    if not is_compiler_name(name):
        return True
    if compiler is None:
        return False
    m = _FAMILY_NAME.match(name)
    if m is None:
        return name not in ("cc", "c++")  # c89, c99 and their -gcc scripts run the sim's gcc
    return m.group("tool") not in _DRIVERS and m.group("major") is None


def layout(compiler: Compiler) -> dict[str, str | None]:
    """The sim's own compiler entries of /usr/bin: name -> what it links to, None for the program itself."""
    m, entries = compiler.major, {}
    for tool in _DRIVERS:
        entries[f"{TRIPLET}-{tool}-{m}"] = None
        entries[f"{tool}-{m}"] = f"{TRIPLET}-{tool}-{m}"
        entries[tool] = f"{tool}-{m}"
        entries[f"{TRIPLET}-{tool}"] = f"{tool}-{m}"
    entries["cc"], entries["c++"] = "gcc", "g++"
    return entries


# --------------------------------------------------------------------------- the program

_COPYRIGHT = ("Copyright (C) {year} Free Software Foundation, Inc.\n"
              "This is free software; see the source for copying conditions.  There is NO\n"
              "warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.\n\n")

# Ubuntu's build of GCC, as `gcc -v` reports it (its configure line, shortened to the options that
# say where things are and what the compiler targets).
_VERBOSE = """Using built-in specs.
COLLECT_GCC={name}
COLLECT_LTO_WRAPPER=/usr/libexec/gcc/{triplet}/{major}/lto-wrapper
OFFLOAD_TARGET_NAMES=nvptx-none:amdgcn-amdhsa
OFFLOAD_TARGET_DEFAULT=1
Target: {triplet}
Configured with: ../src/configure -v --with-pkgversion='{pkgversion}' \
--with-bugurl=file:///usr/share/doc/gcc-{major}/README.Bugs --enable-languages=c,ada,c++,go,d,fortran,objc,obj-c++,m2 \
--prefix=/usr --with-gcc-major-version-only --program-suffix=-{major} --program-prefix={triplet}- --enable-shared \
--enable-linker-build-id --libexecdir=/usr/libexec --without-included-gettext --enable-threads=posix --libdir=/usr/lib \
--enable-nls --enable-bootstrap --enable-clocale=gnu --enable-libstdcxx-debug --enable-libstdcxx-time=yes \
--with-default-libstdcxx-abi=new --enable-gnu-unique-object --disable-vtable-verify --enable-plugin \
--enable-default-pie --with-system-zlib --enable-multiarch --disable-werror --enable-cet --with-arch-32=i686 \
--with-abi=m64 --with-multilib-list=m32,m64,mx32 --enable-multilib --with-tune=generic --enable-offload-defaulted \
--without-cuda-driver --enable-checking=release --build={triplet} --host={triplet} --target={triplet}
Thread model: posix
Supported LTO compression algorithms: zlib zstd
{v_line}
"""


def driver_of(name: str) -> str:
    """gcc, g++ or cpp: the driver a name runs (gcc-13, x86_64-linux-gnu-g++-13, cc, c++...)."""
    m = _FAMILY_NAME.match(name)
    return _GENERIC.get(name) or (m.group("tool") if m else "gcc")


def main(argv: list[str], root) -> int:
    name = os.path.basename(sys.argv[0])
    compiler = parse(host_state.load(root).get("gcc"))
    if compiler is None:  # the state changed after the host was built: it has no compiler now
        sys.stderr.write(f"{name}: command not found\n")
        return 127
    driver = driver_of(name)
    if argv == ["--version"]:
        sys.stdout.write(f"{name} ({compiler.pkgversion}) {compiler.version}\n"
                         + _COPYRIGHT.format(year=2010 + int(compiler.major)))
        return 0
    if argv == ["-v"] and driver != "cpp":  # `cpp -v` preprocesses its standard input
        sys.stderr.write(_VERBOSE.format(name=name, triplet=TRIPLET, major=compiler.major,
                                         pkgversion=compiler.pkgversion, v_line=compiler.v_line()))
        return 0
    if argv == ["-dumpversion"]:  # Ubuntu builds GCC with --with-gcc-major-version-only
        sys.stdout.write(compiler.major + "\n")
        return 0
    if argv == ["-dumpfullversion"]:
        sys.stdout.write(compiler.version + "\n")
        return 0
    return _host_compiler(name, driver, argv)


def _host_compiler(name: str, driver: str, argv: list[str]) -> int:
    """Compiling is left to this machine's compiler, the only one there is."""
    real = os.path.join(HOST_USR_BIN, driver)
    if not os.access(real, os.X_OK):
        sys.stderr.write(f"{name}: this simulated host's compiler answers --version, -v, -dumpversion and "
                         f"-dumpfullversion; anything else needs a {driver} on the machine running the sim, "
                         f"which has none\n")
        return 1
    os.execv(real, [driver, *argv])
    return 1
