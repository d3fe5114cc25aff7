"""Operating-system packages: apt, dpkg, rpm/dnf/yum, update-alternatives, ldconfig, ubuntu-drivers."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import _getopt, _operands
from agent.safety.classifier.registry import _handles

_APT_READ = frozenset({"list", "show", "search", "policy", "depends", "rdepends", "madison", "showsrc", "showpkg",
                       "pkgnames", "stats", "unmet", "dump", "dumpavail"})
_APT_DESTRUCTIVE = frozenset({"remove", "purge", "autoremove", "autopurge", "dist-upgrade", "full-upgrade"})
# Packages that install or replace the NVIDIA kernel driver (the `cuda` metapackages pull it in too).
_DRIVER_PACKAGE = re.compile(
    r"^(nvidia-driver|nvidia-open|nvidia-dkms|nvidia-kernel|nvidia-headless|nvidia-utils|libnvidia-compute|"
    r"cuda-drivers|linux-modules-nvidia|linux-image|kmod-nvidia|akmod-nvidia|xorg-x11-drv-nvidia)|^cuda(-\d+-\d+)?$"
)
_DRIVER_SAMPLES = ("nvidia-driver-580", "nvidia-open-580", "cuda-drivers", "cuda", "cuda-13-0", "nvidia-dkms-580")


def _is_driver_package(arg: Arg) -> bool:
    if arg.text is None:
        return False
    name = re.split(r"[=:]", arg.text, maxsplit=1)[0]
    if arg.pattern:
        return any(fnmatch.fnmatchcase(sample, name) for sample in _DRIVER_SAMPLES)
    return bool(_DRIVER_PACKAGE.match(name))


@_handles("apt", "apt-get", "apt-cache", "aptitude")
def _apt(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_value="oct", long_value={"--option", "--config-file", "--target-release",
                                                            "--default-release"}, permute=True)
    sub = opts.operands[0].text if opts.operands else None
    packages = opts.operands[1:]
    hooks = opts.has("-o", "--option", "-c", "--config-file")
    if sub in _APT_READ and not hooks and (cmd.prog != "apt-cache" or sub != "gencaches"):
        an.allow(cmd, f"{cmd.prog} {sub}")
    elif sub in _APT_READ:
        an.add(MUTATING, f"{cmd.prog}:-o", f"`{cmd.prog} -o/-c` sets APT options, which can run hook commands")
    elif sub in _APT_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "reinstall") and any(_is_driver_package(p) for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    elif sub == "install" and any(p.text and p.text.endswith("-") and not p.text.startswith("-") for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:remove", f"`{cmd.prog} install pkg-` (a trailing minus) uninstalls pkg")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages or APT state")


@_handles("dnf", "yum", "microdnf", "zypper", "tdnf")
def _rpm_tool(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    sub = operands[0].text if operands else None
    if sub in ("remove", "erase", "autoremove", "rm", "groupremove", "distro-sync"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "in", "reinstall", "update", "upgrade") and any(_is_driver_package(p) for p in operands[1:]):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages")


_DPKG_READ = frozenset(
    {"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "-p", "--print-avail", "-c",
     "--contents", "-I", "--info", "--get-selections", "--print-architecture", "--print-foreign-architectures",
     "--version", "--help", "-C", "--audit", "-V", "--verify", "--compare-versions", "--admindir", "--root",
     "--no-pager", "-W", "--show", "-f", "--showformat"}
)


@_handles("dpkg")
def _dpkg(an: Analysis, cmd: _Cmd) -> None:
    options = [(a.text or "").split("=", 1)[0] for a in cmd.args if (a.text or "").startswith("-")]
    if any(o in ("-r", "--remove", "-P", "--purge") for o in options):
        an.add(DESTRUCTIVE, "dpkg:-r", "`dpkg -r/-P` removes installed packages")
    elif any(o in ("-i", "--install") for o in options) and any(
        _is_driver_package(Arg(posixpath.basename(a.text))) for a in _operands(cmd.args) if a.text
    ):
        an.add(DESTRUCTIVE, "dpkg:driver-install", "`dpkg -i` of a driver package replaces the GPU driver")
    elif options and all(o in _DPKG_READ for o in options):
        an.allow(cmd)
    else:
        shown = next((o for o in options if o not in _DPKG_READ), "...")
        an.add(MUTATING, f"dpkg:{shown}", f"`dpkg {shown}` installs, configures or changes package state")


@_handles("dpkg-query")
def _dpkg_query(an: Analysis, cmd: _Cmd) -> None:
    an.allow(cmd)  # only ever queries the package database


@_handles("update-alternatives", "alternatives")
def _update_alternatives(an: Analysis, cmd: _Cmd) -> None:
    names = [(a.text or "").split("=", 1)[0] for a in cmd.args if (a.text or "").startswith("--")]
    changing = [n for n in names if n in ("--set", "--install", "--remove", "--remove-all", "--config", "--auto",
                                           "--all", "--set-selections")]
    if changing:
        an.add(
            DESTRUCTIVE,
            f"update-alternatives:{changing[0]}",
            f"`{cmd.prog} {changing[0]}` switches which version a system-wide name points to",
        )
    elif "--log" in names:
        an.add(MUTATING, "update-alternatives:--log", f"`{cmd.prog} --log` writes a log file")
    elif any(n in ("--display", "--query", "--list", "--get-selections") for n in names):
        an.allow(cmd)
    else:
        an.add(MUTATING, "update-alternatives:unknown", f"`{cmd.prog}` without a query action is not read-only")


@_handles("ldconfig")
def _ldconfig(an: Analysis, cmd: _Cmd) -> None:
    if cmd.args and all(t in ("-p", "--print-cache", "-V", "--version", "--help") for t in cmd.texts):
        an.allow(cmd)
    else:
        an.add(MUTATING, "ldconfig:rebuild-cache", "`ldconfig` without -p rebuilds the dynamic linker cache")


@_handles("ubuntu-drivers")
def _ubuntu_drivers(an: Analysis, cmd: _Cmd) -> None:
    sub = next((t for t in cmd.texts if t and not t.startswith("-")), None)
    if sub in ("install", "autoinstall"):
        an.add(DESTRUCTIVE, "ubuntu-drivers:install", f"`ubuntu-drivers {sub}` installs a GPU driver")
    elif sub in ("list", "devices", "debug"):
        an.allow(cmd, f"ubuntu-drivers {sub}")
    else:
        an.add(MUTATING, f"ubuntu-drivers:{sub or 'unknown'}", "`ubuntu-drivers` with these arguments is not read-only")
