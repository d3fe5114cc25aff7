"""dpkg and dpkg-query of the simulated host, answering from the sim's own package database.

The database (ROOT/.sim/dpkg: a status file and info/PKG.list files, in dpkg's own formats) holds a
small Ubuntu 24.04 system: its base packages, the kernel of the sim's state, and the compiler of the
sim's state (gcc, g++, cpp and build-essential) when it has one from Ubuntu's packages. The NVIDIA
driver and the CUDA toolkits came from runfiles, which register nothing with dpkg, so there is no
nvidia-* or cuda-* package, as on a host set up that way.

The read forms (-l, -s, -L, -S, -W with -f, --get-selections, --print-architecture,
--compare-versions) are answered by this machine's dpkg-query and dpkg pointed at that database
(--admindir), never at this machine's own; everything else is refused in one line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import compiler as sim_compiler
from . import state as host_state

ADMINDIR = "dpkg"  # under the sim's state directory
HOST_USR_BIN = "/.host/usr/bin"
ARCH = "amd64"
UBUNTU = "Ubuntu Developers <ubuntu-devel-discuss@lists.ubuntu.com>"
# The dpkg of Ubuntu 24.04; --version reports its upstream part.
DPKG_VERSION = "1.22.6ubuntu6.1"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    description: str
    section: str = "utils"
    priority: str = "optional"
    files: tuple[str, ...] = ()
    source: str | None = None
    depends: str | None = None
    multi_arch: str | None = None  # "same": listed as name:amd64, as dpkg lists such libraries
    essential: bool = False
    arch: str = ARCH
    extra: dict = field(default_factory=dict)


_LIBC = "2.39-0ubuntu8.5"
_GCC14 = "14.2.0-4ubuntu2~24.04"
_BINUTILS = "2.42-4ubuntu2.5"

# A small Ubuntu 24.04.3 server. Packages whose programs this machine lends the sim (python3, for
# one) are left out rather than listed at a version the program itself would contradict.
BASE = (
    Package("base-files", "13ubuntu10.3", "Debian base system miscellaneous files", "admin", "required",
            ("/etc/os-release", "/usr/lib/os-release"), essential=True),
    Package("bash", "5.2.21-2ubuntu4", "GNU Bourne Again SHell", "shells", "required", ("/bin/bash",),
            essential=True),
    Package("coreutils", "9.4-3ubuntu6.1", "GNU core utilities", "utils", "required", essential=True),
    Package("dpkg", DPKG_VERSION, "Debian package management system", "admin", "required",
            ("/usr/bin/dpkg", "/usr/bin/dpkg-query", "/usr/bin/dpkg-deb"), essential=True),
    Package("libc6", _LIBC, "GNU C Library: Shared libraries", "libs", "required",
            ("/usr/lib/x86_64-linux-gnu/libc.so.6",), source="glibc", multi_arch="same"),
    Package("libc-bin", _LIBC, "GNU C Library: Binaries", "libs", "required", ("/usr/bin/ldd", "/sbin/ldconfig"),
            source="glibc", essential=True),
    Package("gcc-14-base", _GCC14, "GCC, the GNU Compiler Collection (base package)", "libs", "required",
            source="gcc-14", multi_arch="same"),
    Package("libgcc-s1", _GCC14, "GCC support library", "libs", "required",
            ("/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",), source="gcc-14", multi_arch="same"),
    Package("libstdc++6", _GCC14, "GNU Standard C++ Library v3", "libs", "important",
            ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6",), source="gcc-14", multi_arch="same"),
    Package("binutils", _BINUTILS, "GNU assembler, linker and binary utilities", "devel", "optional",
            ("/usr/bin/as", "/usr/bin/ld", "/usr/bin/objdump")),
    Package("binutils-x86-64-linux-gnu", _BINUTILS, "GNU binary utilities, for x86-64-linux-gnu target", "devel",
            "optional", ("/usr/bin/x86_64-linux-gnu-as", "/usr/bin/x86_64-linux-gnu-ld.bfd"), source="binutils"),
    Package("make", "4.3-4.1build2", "utility for directing compilation", "devel", "optional", ("/usr/bin/make",),
            source="make-dfsg"),
    Package("kmod", "31+20240202-2ubuntu7.1", "tools for managing Linux kernel modules", "admin", "important",
            ("/usr/bin/kmod", "/usr/sbin/lsmod", "/usr/sbin/modprobe")),
    Package("pciutils", "1:3.10.0-2build1", "PCI utilities", "admin", "standard", ("/usr/bin/lspci",)),
    Package("curl", "8.5.0-2ubuntu10.6", "command line tool for transferring data with URL syntax", "web",
            "optional", ("/usr/bin/curl",)),
    Package("sudo", "1.9.15p5-3ubuntu5.24.04.1", "Provide limited super user privileges to specific users",
            "admin", "important", ("/usr/bin/sudo",)),
)


def kernel_packages(kernel: dict) -> list[Package]:
    """linux-image and linux-modules of the kernel the sim runs ("6.8.0-60-generic" is 6.8.0-60.63)."""
    release = kernel["release"]
    base, dash, flavour = release.rpartition("-")
    if not dash:
        base, flavour = release, "generic"
    build = kernel["version"].lstrip("#").split("-", 1)[0]
    version = f"{base}.{build}" if build.isdigit() else f"{base}.1"
    upstream = base.split("-")[0]
    return [Package(f"linux-image-{release}", version, f"Signed kernel image {flavour}", "kernel", "optional",
                    (f"/boot/vmlinuz-{release}",), source=f"linux-signed ({version})"),
            Package(f"linux-modules-{release}", version, f"Linux kernel extra modules for version {upstream} on 64 bit "
                    "x86 SMP", "kernel", "optional", (f"/boot/System.map-{release}", f"/lib/modules/{release}"),
                    source=f"linux ({version})")]


def compiler_packages(compiler: sim_compiler.Compiler | None) -> list[Package]:
    """Ubuntu's packages of the sim's gcc: each driver, its per-architecture part, the development
    libraries, and (for noble's default gcc 13) the gcc, g++, cpp and build-essential metapackages."""
    if compiler is None or compiler.package_version is None:
        return []  # no compiler, or one built by hand: dpkg knows none
    m, v, t = compiler.major, compiler.package_version, sim_compiler.TRIPLET
    arch = t.replace("_", "-")
    source = f"gcc-{m}"
    out = [Package(f"gcc-{m}-base", v, "GCC, the GNU Compiler Collection (base package)", "libs", "optional",
                   source=source, multi_arch="same"),
           Package(f"libgcc-{m}-dev", v, "GCC support library (development files)", "libdevel", "optional",
                   (f"/usr/lib/gcc/{t}/{m}/libgcc.a",), source=source, multi_arch="same"),
           Package(f"libstdc++-{m}-dev", v, "GNU Standard C++ Library v3 (development files)", "libdevel",
                   "optional", (f"/usr/include/c++/{m}",), source=source, multi_arch="same"),
           Package("libc6-dev", _LIBC, "GNU C Library: Development Libraries and Header Files", "libdevel",
                   "optional", ("/usr/include/stdio.h",), source="glibc", multi_arch="same")]
    for tool, what in (("cpp", "GNU C preprocessor"), ("gcc", "GNU C compiler"), ("g++", "GNU C++ compiler")):
        out.append(Package(f"{tool}-{m}", v, what, "interpreters" if tool == "cpp" else "devel", "optional",
                           (f"/usr/bin/{tool}-{m}",), source=source,
                           depends=f"{tool}-{m}-{arch} (= {v}), gcc-{m}-base (= {v})"))
        out.append(Package(f"{tool}-{m}-{arch}", v, f"{what} for the {t} architecture",
                           "interpreters" if tool == "cpp" else "devel", "optional",
                           (f"/usr/bin/{t}-{tool}-{m}",), source=source))
    if m == "13":  # noble's gcc-defaults and build-essential point at gcc 13
        meta = "4:13.2.0-7ubuntu1"
        for tool, what, files in (("cpp", "GNU C preprocessor (cpp)", ("/usr/bin/cpp", f"/usr/bin/{t}-cpp")),
                                  ("gcc", "GNU C compiler", ("/usr/bin/gcc", f"/usr/bin/{t}-gcc", "/usr/bin/c89-gcc",
                                                             "/usr/bin/c99-gcc")),
                                  ("g++", "GNU C++ compiler", ("/usr/bin/g++", f"/usr/bin/{t}-g++"))):
            out.append(Package(tool, meta, what, "interpreters" if tool == "cpp" else "devel", "optional", files,
                               source="gcc-defaults (1.214ubuntu1)", depends=f"{tool}-{m} (>= 13.2.0-11~)"))
        out.append(Package("build-essential", "12.10ubuntu1", "Informational list of build-essential packages",
                           "devel", "optional", depends="libc6-dev | libc-dev, gcc (>= 4:12.3), g++ (>= 4:12.3), make"))
    return out


def packages(state: dict) -> list[Package]:
    return sorted([*BASE, *kernel_packages(state["kernel"]), *compiler_packages(sim_compiler.parse(state.get("gcc")))],
                  key=lambda p: p.name)


def write_database(root: Path, state: dict) -> Path:
    """ROOT/.sim/dpkg in dpkg's formats: status, info/PKG.list and the directories dpkg-query expects."""
    admin = root / host_state.STATE_DIR / ADMINDIR
    (admin / "info").mkdir(parents=True, exist_ok=True)
    (admin / "updates").mkdir(exist_ok=True)
    (admin / "info" / "format").write_text("1\n")  # the multiarch layout: info/libc6:amd64.list
    stanzas = []
    for p in packages(state):
        stanzas.append(_stanza(p))
        key = f"{p.name}:{p.arch}" if p.multi_arch == "same" else p.name
        (admin / "info" / f"{key}.list").write_text("".join(f"{f}\n" for f in _listed_files(p)))
    (admin / "status").write_text("\n".join(stanzas))
    return admin


def _stanza(p: Package) -> str:
    fields = [("Package", p.name), ("Essential", "yes" if p.essential else None),
              ("Status", "install ok installed"), ("Priority", p.priority), ("Section", p.section),
              ("Installed-Size", str(64 + 16 * len(p.files))), ("Maintainer", UBUNTU), ("Architecture", p.arch),
              ("Multi-Arch", p.multi_arch), ("Source", p.source), ("Version", p.version), ("Depends", p.depends),
              ("Description", f"{p.description}\n The {p.name} package of Ubuntu 24.04, on a simulated host.")]
    return "".join(f"{k}: {v}\n" for k, v in fields if v is not None)


def _listed_files(p: Package) -> list[str]:
    """Every file and its parent directories, in dpkg's order (a directory before what it holds)."""
    paths = {"/.", f"/usr/share/doc/{p.name}", f"/usr/share/doc/{p.name}/copyright", *p.files}
    for path in list(paths):
        parent = os.path.dirname(path)
        while parent not in ("/", ""):
            paths.add(parent)
            parent = os.path.dirname(parent)
    return sorted(paths, key=lambda f: ("" if f == "/." else f))


# --------------------------------------------------------------------------- the programs

# The read forms each program answers. dpkg takes -l, -s, -L and -S and hands them to dpkg-query, as
# it does on any host; -W and its -f format are dpkg-query's own.
_SHARED_READS = {"-l", "--list", "-s", "--status", "-L", "--listfiles", "-S", "--search"}
_READS = {"dpkg-query": _SHARED_READS | {"-W", "--show", "--showformat"},
          "dpkg": _SHARED_READS | {"--get-selections", "--print-architecture", "--print-foreign-architectures",
                                   "--compare-versions", "-C", "--audit"}}
_INFO = {"--help", "-?", "--version"}
_PLAIN_OPTIONS = {"--no-pager"}


class _Refused(Exception):
    pass


def dpkg_query_main(argv: list[str], root) -> int:
    return _answer("dpkg-query", argv, root)


def dpkg_main(argv: list[str], root) -> int:
    return _answer("dpkg", argv, root)


def _answer(prog: str, argv: list[str], root) -> int:
    try:
        given = _options(prog, argv)
    except _Refused as e:
        sys.stderr.write(f"{prog}: error: {e}\n")
        return 2
    if "--version" in given:
        return _version(prog)
    if given & {"--help", "-?"}:
        return _run(prog, argv, admindir=None)
    return _run(prog, argv, admindir=str(Path(root) / host_state.STATE_DIR / ADMINDIR))


def _options(prog: str, argv: list[str]) -> set[str]:
    """The options given, each checked against the read forms `prog` answers (a value of -f skipped)."""
    allowed = _READS[prog] | _INFO | _PLAIN_OPTIONS
    formats = prog == "dpkg-query"
    given: set[str] = set()
    it = iter(argv)
    for arg in it:
        if arg == "--" or arg == "-" or not arg.startswith("-"):
            continue
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if name not in allowed:
                raise _Refused(_refusal(prog, name))
            if name == "--showformat" and "=" not in arg:
                next(it, None)
            given.add(name)
            continue
        for i, letter in enumerate(arg[1:], 1):  # short options bundle: -Wf'${Package}\n'
            name = f"-{letter}"
            if name == "-f" and formats:
                if i == len(arg) - 1:
                    next(it, None)
                break
            if name not in allowed:
                raise _Refused(_refusal(prog, name))
            given.add(name)
    return given


def _refusal(prog: str, option: str) -> str:
    reads = "-l, -s, -L, -S, -W and -f" if prog == "dpkg-query" else \
        "-l, -s, -L, -S, --get-selections, --print-architecture and --compare-versions; -W is dpkg-query's"
    return (f"{option} is not answered on this simulated host: its {prog} reads the package database ({reads}) "
            f"and installs, removes or configures nothing; software comes to this host from runfiles and pip")


def _version(prog: str) -> int:
    upstream = DPKG_VERSION.split("ubuntu")[0]
    what = "'dpkg' package management program" if prog == "dpkg" else \
        "dpkg-query package management program query tool"
    sys.stdout.write(f"Debian {what} version {upstream} ({ARCH}).\n"
                     "This is free software; see the GNU General Public License version 2 or\n"
                     "later for copying conditions. There is NO warranty.\n")
    return 0


def _run(program: str, argv: list[str], admindir: str | None) -> int:
    real = os.path.join(HOST_USR_BIN, program)
    if not os.access(real, os.X_OK):
        sys.stderr.write(f"{program}: this simulated host reads its package database with the {program} of the "
                         f"machine running the sim, which has none; install dpkg there\n")
        return 2
    env = {k: v for k, v in os.environ.items() if k not in ("DPKG_ADMINDIR", "DPKG_ROOT")}
    args = [program, *([f"--admindir={admindir}"] if admindir else []), *argv]
    os.execve(real, args, env)
    return 2
