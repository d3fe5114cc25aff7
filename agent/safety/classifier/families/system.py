"""The system: clock, host name, kernel log, partitions, kernel modules, cron, mounts, and programs
that change the host whatever their arguments (reboot, useradd, sysctl...)."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec, _abbreviates, _long_options, _short_options
from agent.safety.classifier.registry import _HANDLERS, _checked, _handles, _simple, specified
from tools.base import RiskClass

DATE = Spec(
    "date",
    "-d|--date= -f|--file= -I|--iso-8601[=] -R|--rfc-email --rfc-3339= -r|--reference= -u|--utc|--universal "
    "--debug --resolution --help --version -s|--set=!clock",
    effects={"clock": Effect(MUTATING, "sets the system clock")},
)


def _date_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """`date +FORMAT` prints; any other operand (`date 010100002030`) sets the clock."""
    setting = next((a for a in parsed.operands if not (a.text or "").startswith("+")), None)
    if setting is not None:
        an.add(MUTATING, "date:set", f"`date {setting.text}` sets the system clock")
        return False
    return True


def _hostname_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    reads = {"-s", "--short", "-f", "--fqdn", "--long", "-d", "--domain", "-i", "--ip-address", "-I",
             "--all-ip-addresses", "-A", "--all-fqdns", "-a", "--alias", "-y", "--yp", "--nis", "-V", "--version",
             "-h", "--help"}
    if all(t in reads for t in cmd.texts):
        return None
    return MUTATING, "hostname:set", "`hostname NAME` (or -F, -b) sets the host name"


def _dmesg_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for text in cmd.texts:
        text = text or ""
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            if any(name == f or _abbreviates(name, f, 5) for f in ("--clear", "--read-clear", "--console-off",
                                                                   "--console-on", "--console-level")):
                return MUTATING, "dmesg:--clear", f"`dmesg {name}` clears the kernel log or changes console logging"
        elif text.startswith("-"):
            for letter in text[1:]:
                if letter in "cCDEn":
                    return MUTATING, f"dmesg:-{letter}", f"`dmesg -{letter}` clears the kernel log or changes console logging"
                if letter in "flsFS":
                    break
    return None


def _partition_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    """fdisk and friends: listing is read-only, anything else can rewrite a partition table."""
    texts = [t or "" for t in cmd.texts]
    listing = {"fdisk": {"-l", "--list"}, "sfdisk": {"-l", "--list", "-d", "--dump", "-s", "--show-size"},
               "sgdisk": {"-p", "--print"}, "gdisk": {"-l"}, "parted": {"-l", "--list"}}.get(cmd.prog, set())
    options = [t for t in texts if t.startswith("-")]
    words = [t for t in texts if not t.startswith("-")]
    if cmd.prog == "parted":
        scripted = all(o in ("-s", "--script", "-l", "--list", "-m", "--machine") for o in options)
        if scripted and (set(options) & listing and not words or words[1:] == ["print"]):
            return None
    elif options and all(o in listing for o in options):
        return None
    return FORBIDDEN, "forbidden:partition-table", f"`{cmd.prog}` can rewrite a disk's partition table"


# -- commands that change the host


_DESTRUCTIVE_SIMPLE = {
    "rmdir": "`rmdir` removes directories",
    "unlink": "`unlink` deletes a file",
    "reboot": "`reboot` restarts the machine",
    "shutdown": "`shutdown` powers off or restarts the machine",
    "poweroff": "`poweroff` powers the machine off",
    "halt": "`halt` stops the machine",
    "kexec": "`kexec` boots another kernel",
    "init": "`init` changes the runlevel (0 halts, 6 reboots)",
    "telinit": "`telinit` changes the runlevel (0 halts, 6 reboots)",
    "kill": "`{prog}` sends signals that stop running processes",
    "pkill": "`{prog}` sends signals that stop running processes",
    "killall": "`{prog}` sends signals that stop running processes",
    "killall5": "`{prog}` sends signals that stop running processes",
    "skill": "`{prog}` sends signals that stop running processes",
    "rmmod": "`rmmod` unloads a kernel module",
    "userdel": "`userdel` deletes a user account",
    "groupdel": "`groupdel` deletes a group",
    "deluser": "`deluser` deletes a user account",
    "nvidia-uninstall": "`nvidia-uninstall` removes the NVIDIA driver",
    "nvidia-installer": "`nvidia-installer` installs or removes the NVIDIA driver",
    "cuda-uninstaller": "`cuda-uninstaller` removes a CUDA toolkit",
}
_MUTATING_SIMPLE = {
    "mkdir": "`mkdir` creates directories",
    "touch": "`touch` creates files or changes their times",
    "mktemp": "`mktemp` creates a file or directory",
    "gzip": "`{prog}` compresses or decompresses files in place",
    "gunzip": "`{prog}` compresses or decompresses files in place",
    "bzip2": "`{prog}` compresses or decompresses files in place",
    "xz": "`{prog}` compresses or decompresses files in place",
    "zstd": "`{prog}` compresses or decompresses files in place",
    "7z": "`7z` packs or unpacks archives, writing files",
    "patch": "`patch` edits files",
    "make": "`make` runs build commands",
    "cmake": "`cmake` configures a build and writes files",
    "ninja": "`ninja` runs build commands",
    "gcc": "`{prog}` compiles code and writes output files",
    "g++": "`{prog}` compiles code and writes output files",
    "cc": "`{prog}` compiles code and writes output files",
    "insmod": "`insmod` loads a kernel module",
    "depmod": "`depmod` rewrites the kernel module index",
    "update-initramfs": "`update-initramfs` rebuilds the boot image",
    "dracut": "`dracut` rebuilds the boot image",
    "umount": "`umount` detaches a filesystem",
    "swapon": "`swapon` enables swap",
    "swapoff": "`swapoff` disables swap",
    "sysctl": "`sysctl` reads or sets kernel parameters",
    "hostnamectl": "`hostnamectl` changes the host name",
    "timedatectl": "`timedatectl` changes time settings",
    "ulimit": "`ulimit` changes resource limits",
    "umask": "`umask` changes the file creation mask",
    "add-apt-repository": "`add-apt-repository` changes the package sources",
    "apt-key": "`apt-key` changes trusted package keys",
    "apt-mark": "`apt-mark` changes package state",
    "snap": "`snap` installs or changes packages",
    "useradd": "`useradd` creates a user account",
    "usermod": "`usermod` changes a user account",
    "groupadd": "`groupadd` creates a group",
    "passwd": "`passwd` changes a password",
    "nvidia-persistenced": "`nvidia-persistenced` starts the persistence daemon",
    "nvidia-ctk": "`nvidia-ctk` changes container runtime configuration",
    "scp": "`scp` copies files between hosts",
    "aria2c": "`aria2c` downloads files",
    "ldd": "`ldd` may execute the program it inspects",
    "read": "`read` assigns shell variables",
    "let": "`let` evaluates arithmetic, which can assign variables and run commands through subscripts",
    "ip": "`ip` can change network configuration",
    "iptables": "`iptables` changes firewall rules",
}

for _name, _reason in _DESTRUCTIVE_SIMPLE.items():
    _HANDLERS[_name] = _simple(DESTRUCTIVE, _reason)
for _name, _reason in _MUTATING_SIMPLE.items():
    _HANDLERS[_name] = _simple(MUTATING, _reason)


@_handles("crontab")
def _crontab(an: Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args):
        an.add(DESTRUCTIVE, "crontab:-r", "`crontab -r` deletes all scheduled jobs")
    elif cmd.texts == ["-l"]:
        an.allow(cmd)
    else:
        an.add(MUTATING, "mutating:crontab", "`crontab` changes scheduled jobs")


@_handles("dkms")
def _dkms(an: Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("install", "build", "autoinstall") and any("nvidia" in (t or "") for t in cmd.texts):
        an.add(DESTRUCTIVE, "dkms:driver-install", f"`dkms {sub}` of the NVIDIA module replaces the GPU driver")
    elif sub in ("remove", "uninstall", "unbuild"):
        an.add(DESTRUCTIVE, f"dkms:{sub}", f"`dkms {sub}` removes a kernel module such as the GPU driver")
    elif sub == "status":
        an.allow(cmd, "dkms status")
    else:
        an.add(MUTATING, f"dkms:{sub or 'unknown'}", f"`dkms {sub or '...'}` builds or installs kernel modules")


@_handles("modprobe")
def _modprobe(an: Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args) or any(_abbreviates(n, "--remove", 5) or n == "--remove" for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "modprobe:-r", "`modprobe -r` unloads a kernel module, stopping whatever uses it")
    else:
        an.add(MUTATING, "modprobe:load", "`modprobe` loads a kernel module")


@_handles("module", "ml")
def _module(an: Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("unload", "rm", "del", "purge", "swap", "switch", "sw"):
        an.add(DESTRUCTIVE, "module:unload", f"`module {sub}` unloads environment modules other commands rely on")
    else:
        an.add(MUTATING, f"module:{sub or 'unknown'}", f"`module {sub or '...'}` changes the loaded environment modules")


@_handles("fuser")
def _fuser(an: Analysis, cmd: _Cmd) -> None:
    if "k" in _short_options(cmd.args) or "--kill" in _long_options(cmd.args):
        an.add(DESTRUCTIVE, "fuser:-k", "`fuser -k` kills the processes using a file or device")
    else:
        an.allow(cmd)


@_handles("mount")
def _mount(an: Analysis, cmd: _Cmd) -> None:
    if all(t in ("-l", "--show-labels") for t in cmd.texts):
        an.allow(cmd)  # without arguments mount only lists what is mounted
    else:
        an.add(MUTATING, "mutating:mount", "`mount` attaches a filesystem")


_HANDLERS["date"] = specified(DATE, _date_operands)
_HANDLERS["hostname"] = _checked(_hostname_check)
_HANDLERS["dmesg"] = _checked(_dmesg_check)
for _name in ("fdisk", "sfdisk", "sgdisk", "gdisk", "cfdisk", "parted"):
    _HANDLERS[_name] = _checked(_partition_check)

SPECS = [DATE]
