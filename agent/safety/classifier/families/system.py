"""The system: clock, host name, kernel log, partitions, kernel modules, cron, limits, mounts, and
programs that change the host whatever their arguments (reboot, useradd...)."""

from __future__ import annotations

import re

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import REMOTE_HOST, Effect, Parsed, Spec, _long_options, _short_options
from agent.safety.classifier.paths import in_trusted_places, read_risk, trusted_program_path
from agent.safety.classifier.registry import (
    _HANDLERS,
    _checked,
    _handles,
    _simple,
    files_read_ok,
    judge_by_spec,
    specified,
)
from tools.base import RiskClass

_REMOTE = REMOTE_HOST  # systemd -H / -M


def _reads_file(an: Analysis, cmd: _Cmd, parsed: Parsed, *names: str) -> bool:
    """The values of options naming a file the program opens for reading: /dev/watchdog is not read-only."""
    return files_read_ok(an, cmd.prog, parsed.values(*names))


# --------------------------------------------------------------------------- date

DATE = Spec(
    "date",
    "-d|--date= -f|--file= -I|--iso-8601[=] -R|--rfc-email --rfc-3339= -r|--reference= -u|--utc|--universal "
    "--debug --resolution --help --version -s|--set=!clock",
    effects={"clock": Effect(MUTATING, "sets the system clock")},
)


def _date_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """`date +FORMAT` prints; any other operand (`date 010100002030`) sets the clock. -f reads dates
    from a file, which may be a device."""
    if not _reads_file(an, cmd, parsed, "--file"):
        return False
    setting = next((a for a in parsed.operands if not (a.text or "").startswith("+")), None)
    if setting is not None:
        an.add(MUTATING, "date:set", f"`date {setting.text}` sets the system clock")
        return False
    return True


# --------------------------------------------------------------------------- host name

# hostname(1) of the Debian `hostname` package (getopt_long): it prints the name unless given one.
HOSTNAME = Spec(
    "hostname",
    "-a|--alias -A|--all-fqdns -b|--boot!set -d|--domain -f|--fqdn|--long -F|--file=!set -h|--help "
    "-i|--ip-address -I|--all-ip-addresses -s|--short -V|--version -v|--verbose -y|--yp|--nis",
    effects={"set": Effect(MUTATING, "sets the host name")},
)


def _hostname_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands:
        an.add(MUTATING, "hostname:set", f"`hostname {parsed.operands[0].text}` sets the host name")
        return False
    return True


# systemd's hostnamectl: `status` and a property verb without a value print; with a value they set.
HOSTNAMECTL = Spec(
    "hostnamectl",
    "-h|--help --version --no-ask-password -H|--host=!remote -M|--machine=!remote --transient --static --pretty "
    "--json=",
    effects={"remote": _REMOTE},
)
_HOSTNAMECTL_GETTERS = frozenset({"hostname", "icon-name", "chassis", "deployment", "location"})


def _hostnamectl_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    words = [a.text for a in parsed.operands]
    verb = words[0] if words else "status"
    if (verb == "status" and len(words) <= 1) or (verb in _HOSTNAMECTL_GETTERS and len(words) == 1):
        return True
    an.add(MUTATING, "mutating:hostnamectl", f"`hostnamectl {verb or '...'}` changes the host name or its settings")
    return False


# --------------------------------------------------------------------------- clock and time zone

TIMEDATECTL = Spec(
    "timedatectl",
    "-h|--help --version --no-pager --no-ask-password -H|--host=!remote -M|--machine=!remote "
    "--adjust-system-clock --monitor -p|--property= -a|--all --value",
    effects={"remote": _REMOTE},
)
_TIMEDATECTL_READS = frozenset({"status", "show", "list-timezones", "timesync-status", "show-timesync"})


def _timedatectl_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    verb = parsed.operands[0].text if parsed.operands else "status"
    if verb in _TIMEDATECTL_READS:
        return True
    an.add(MUTATING, "mutating:timedatectl", f"`timedatectl {verb or '...'}` changes time settings")
    return False


# --------------------------------------------------------------------------- kernel log

# util-linux dmesg: printing the ring buffer is read-only; clearing it or changing what reaches the
# console is not. -F reads its "log" from a file, which may be a device.
DMESG = Spec(
    "dmesg",
    "-C|--clear!clear -c|--read-clear!clear -D|--console-off!console -E|--console-on!console "
    "-n|--console-level=!console -F|--file= -f|--facility= -H|--human -J|--json -k|--kernel -L|--color[=] "
    "-l|--level= -P|--nopager -p|--force-prefix -r|--raw --noescape -S|--syslog -s|--buffer-size= "
    "-u|--userspace -w|--follow -W|--follow-new -x|--decode -d|--show-delta -e|--reltime -T|--ctime "
    "-t|--notime --time-format= --since= --until= -h|--help -V|--version",
    effects={"clear": Effect(MUTATING, "clears the kernel ring buffer"),
             "console": Effect(MUTATING, "changes which kernel messages reach the console")},
)


def _dmesg_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands:
        an.add(MUTATING, "dmesg:operand", f"`dmesg {parsed.operands[0].text}`: dmesg takes no operands")
        return False
    return _reads_file(an, cmd, parsed, "--file")


# --------------------------------------------------------------------------- kernel parameters and limits

# procps sysctl: `sysctl NAME`, `-a`, `-n NAME` read /proc/sys; `NAME=VALUE`, -w, -p and --system write.
SYSCTL = Spec(
    "sysctl",
    "-a|-A|-X|--all --deprecated --dry-run -b|--binary -e|--ignore -N|--names -n|--values "
    "-p|-f|--load[=]!load --system!load -r|--pattern= -q|--quiet -w|--write!write -o -x "
    "-d|-h|--help -V|--version",
    effects={"load": Effect(MUTATING, "loads kernel parameters from configuration files"),
             "write": Effect(MUTATING, "sets kernel parameters")},
)
_SYSCTL_NAME = re.compile(r"[A-Za-z0-9_-]+([./][A-Za-z0-9_-]+)*")


def _sysctl_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    for operand in parsed.operands:
        text = operand.text or ""
        if "=" in text:
            an.add(MUTATING, "mutating:sysctl", f"`sysctl {text}` sets a kernel parameter")
            return False
        if not _SYSCTL_NAME.fullmatch(text):  # `..` would climb out of /proc/sys
            an.add(MUTATING, "sysctl:name", f"`sysctl {text}` is not a plain parameter name")
            return False
    return True


# bash's ulimit: `-a` and a bare resource option print; a value (`-n 4096`, `-n4096`, `unlimited`) sets.
ULIMIT = Spec("ulimit", "-H -S -a -b -c -d -e -f -i -k -l -m -n -p -q -r -s -t -u -v -x -P -R -T", help=())


def _ulimit_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands:
        an.add(MUTATING, "mutating:ulimit", f"`ulimit ... {parsed.operands[0].text}` changes resource limits")
        return False
    return True


# glibc ldd hands each file to the dynamic loader (`ld.so --verify FILE`, then `LD_TRACE_LOADED_OBJECTS=1
# ld.so FILE`): the loader maps the file and its dependencies, prints where they are and exits before any
# of their code (constructors, IFUNC resolvers) runs, and glibc's ldd no longer runs the file itself.
# -r/-d (relocations) and -u (unused dependencies) make the loader relocate, which runs IFUNC resolvers:
# not read-only. Older ldd scripts ran a program whose ELF interpreter is not the system's directly, so a
# file in a world-writable place (planted there by anyone) is refused; libraries and the host's own
# programs elsewhere (`ldd /usr/bin/nvidia-smi`, `ldd /usr/local/cuda/bin/nvcc`) are not anyone's plant.
LDD = Spec("ldd", "--help --version -d|--data-relocs!relocates -r|--function-relocs!relocates "
                  "-u|--unused!relocates -v|--verbose",
           files=True, effects={"relocates": Effect(MUTATING, "makes the loader relocate the file, which runs its "
                                                              "IFUNC resolvers: code of the file")})
_LIBRARY = re.compile(r"[^/]*\.(so(\.\d+)*|o|a)")


def _ldd_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if not in_trusted_places(an, cmd.prog, parsed.operands):
        return False
    for operand in parsed.operands:
        text = operand.text or ""
        if operand.pattern or not (_LIBRARY.fullmatch(text.rsplit("/", 1)[-1]) or trusted_program_path(text)):
            an.add(MUTATING, "mutating:ldd", f"`ldd {operand.text}` is a program named by a relative path or a "
                                             f"pattern; an older ldd runs a program, so only libraries and programs "
                                             f"at a full path outside world-writable places are accepted")
            return False
    return True


@_handles("ldd")
def _ldd(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, LDD, _ldd_operands)


# --------------------------------------------------------------------------- partitions


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
    "insmod": "`insmod` loads a kernel module",
    "depmod": "`depmod` rewrites the kernel module index",
    "update-initramfs": "`update-initramfs` rebuilds the boot image",
    "dracut": "`dracut` rebuilds the boot image",
    "umount": "`umount` detaches a filesystem",
    "swapoff": "`swapoff` disables swap",
    "umask": "`umask` changes the file creation mask",
    "add-apt-repository": "`add-apt-repository` changes the package sources",
    "apt-key": "`apt-key` changes trusted package keys",
    "snap": "`snap` installs or changes packages",
    "useradd": "`useradd` creates a user account",
    "usermod": "`usermod` changes a user account",
    "groupadd": "`groupadd` creates a group",
    "passwd": "`passwd` changes a password",
    "scp": "`scp` copies files between hosts",
    "aria2c": "`aria2c` downloads files",
    "read": "`read` assigns shell variables",
    "let": "`let` evaluates arithmetic, which can assign variables and run commands through subscripts",
    "iptables": "`iptables` changes firewall rules",
}

for _name, _reason in _DESTRUCTIVE_SIMPLE.items():
    _HANDLERS[_name] = _simple(DESTRUCTIVE, _reason)
for _name, _reason in _MUTATING_SIMPLE.items():
    _HANDLERS[_name] = _simple(MUTATING, _reason)


# `kill -0 PID` sends no signal: the kernel only checks that the process exists and may be signalled.
# Every other form (a signal, -l's listing aside, which kill -0 is not) is the destructive one above.
@_handles("kill")
def _kill(an: Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    if len(texts) >= 2 and texts[0] in ("-0", "-s0", "-n0") and all(t is not None and re.fullmatch(r"[0-9]+", t)
                                                                       for t in texts[1:]):
        an.allow(cmd, "kill -0")
        return
    an.add(DESTRUCTIVE, "destructive:kill", "`kill` sends signals that stop running processes")



# util-linux swapon: --show and --summary list the swap areas; anything else enables swap.
SWAPON = Spec(
    "swapon",
    "-a|--all -d|--discard[=] -e|--ifexists -f|--fixpgsz -o|--options= -p|--priority= -s|--summary "
    "--show[=] --output-all --noheadings --raw --bytes -v|--verbose -h|--help -V|--version -L= -U=",
)


def _swapon_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    listing = ("--summary", "--show", "--output-all", "--noheadings", "--raw", "--bytes", "--help", "--version")
    if parsed.operands or not parsed.used or any(u.option.names[-1] not in listing for u in parsed.used):
        an.add(MUTATING, "mutating:swapon", "`swapon` enables swap")
        return False
    return True


# --------------------------------------------------------------------------- cron

# Vixie/cronie crontab: only -l lists; -r and -i -r delete every job, -e edits, a file (or stdin) installs.
CRONTAB = Spec(
    "crontab",
    "-u= -l -r!remove -e!edit -i -s -n[=] -c -T= -V -h",
    effects={"remove": Effect(DESTRUCTIVE, "deletes all scheduled jobs"),
             "edit": Effect(MUTATING, "edits the scheduled jobs")},
    help=(),
)


def _crontab_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.has("-l") and not parsed.operands:
        return True
    an.add(MUTATING, "mutating:crontab", "`crontab` changes scheduled jobs")
    return False


@_handles("crontab")
def _crontab(an: Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args):  # before the spec: `crontab -ru x` is still a removal
        an.add(DESTRUCTIVE, "crontab:-r", "`crontab -r` deletes all scheduled jobs")
        return
    judge_by_spec(an, cmd, CRONTAB, _crontab_operands)


# --------------------------------------------------------------------------- kernel modules

# dkms (a bash script): `status` only reads its tree, but the framework file, a module's dkms.conf
# (-c) and the trees it is pointed at are sourced as bash.
DKMS_STATUS = Spec(
    "dkms",
    "-m|--module= -v|--module-version= -k|--kernelver= -a|--arch= --all -q|--quiet --verbose -V|--version "
    "-h|--help --dkmsframework=!source -c=!source --dkmstree=!source --sourcetree=!source "
    "--installtree=!source --kernelsourcedir=!source",
    effects={"source": Effect(MUTATING, "sources a file as bash, running whatever it contains")},
    help=(), label="status",
)


@_handles("dkms")
def _dkms(an: Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("install", "build", "autoinstall") and any("nvidia" in (t or "") for t in cmd.texts):
        an.add(DESTRUCTIVE, "dkms:driver-install", f"`dkms {sub}` of the NVIDIA module replaces the GPU driver")
    elif sub in ("remove", "uninstall", "unbuild"):
        an.add(DESTRUCTIVE, f"dkms:{sub}", f"`dkms {sub}` removes a kernel module such as the GPU driver")
    elif sub == "status":
        judge_by_spec(an, _Cmd(cmd.name, cmd.prog, cmd.args[1:], cmd.stdin), DKMS_STATUS, label="dkms status")
    else:
        an.add(MUTATING, f"dkms:{sub or 'unknown'}", f"`dkms {sub or '...'}` builds or installs kernel modules")


# kmod modprobe: -c, -D, -R and the --show/--dump forms print without loading (install commands
# are printed, not run); anything else loads or removes modules. --dry-run is not trusted: it still
# resolves the configuration, and whether every install hook is skipped is kmod's to keep.
MODPROBE = Spec(
    "modprobe",
    "-a|--all -b|--use-blacklist -C|--config= -c|--showconfig|--show-config -D|--show-depends -d|--dirname= "
    "-f|--force --force-modversion --force-vermagic -i|--ignore-install|--ignore-remove -n|--dry-run|--show "
    "-q|--quiet -R|--resolve-alias --remove|-r!remove --remove-dependencies --remove-holders "
    "-S|--set-version= --show-exports --show-modversions|--dump-modversions --first-time -s|--syslog "
    "-v|--verbose -V|--version -h|--help -w|--wait=",
    effects={"remove": Effect(DESTRUCTIVE, "unloads a kernel module, stopping whatever uses it")},
    help=(),
)
_MODPROBE_READS = ("-c", "-D", "-R", "--show-exports", "--show-modversions", "-V", "-h")


def _modprobe_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if not parsed.has(*_MODPROBE_READS):
        an.add(MUTATING, "modprobe:load", "`modprobe` loads a kernel module")
        return False
    return _reads_file(an, cmd, parsed, "-C")


@_handles("modprobe")
def _modprobe(an: Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args) or any(n == "--remove" or (len(n) > 5 and "--remove".startswith(n))
                                              for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "modprobe:-r", "`modprobe -r` unloads a kernel module, stopping whatever uses it")
        return
    judge_by_spec(an, cmd, MODPROBE, _modprobe_operands)


# kmod modinfo only reads: module names are looked up in the module directory, and a path is read
# when it is a regular module file.
MODINFO = Spec(
    "modinfo",
    "-a|--author -d|--description -l|--license -p|--parameters -n|--filename -0|--null -F|--field= "
    "-k|--set-version= -b|--basedir= -V|--version -h|--help",
    help=(),
)


def _modinfo_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    for operand in parsed.operands:
        if "/" in (operand.text or "/"):
            problem = read_risk(operand.text, an.cwd)
            if problem is not None:
                an.add(problem[0], f"modinfo:{problem[1]}", f"`modinfo` reads {problem[2]}")
                return False
    return True


@_handles("module", "ml")
def _module(an: Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("unload", "rm", "del", "purge", "swap", "switch", "sw"):
        an.add(DESTRUCTIVE, "module:unload", f"`module {sub}` unloads environment modules other commands rely on")
    else:
        an.add(MUTATING, f"module:{sub or 'unknown'}", f"`module {sub or '...'}` changes the loaded environment modules")


# --------------------------------------------------------------------------- processes and mounts

# psmisc fuser matches long options by their full names only; -k kills, -SIGNAL picks the signal.
FUSER = Spec(
    "fuser",
    "-a|--all -i|--interactive -I|--inode -k|--kill!kill -l|--list-signals -m|--mount -M|--ismountpoint "
    "-n|--namespace= -s|--silent -u|--user -v|--verbose -w|--writeonly -V|--version -4|--ipv4 -6|--ipv6",
    style="exact", effects={"kill": Effect(DESTRUCTIVE, "kills the processes using a file or device")},
    not_options="--help",  # its help text starts "Invalid option --help"
)


@_handles("fuser")
def _fuser(an: Analysis, cmd: _Cmd) -> None:
    if "k" in _short_options(cmd.args) or "--kill" in _long_options(cmd.args):
        an.add(DESTRUCTIVE, "fuser:-k", "`fuser -k` kills the processes using a file or device")
        return
    judge_by_spec(an, cmd, FUSER)


# util-linux findmnt only reads mount tables; -F names the table file it opens.
FINDMNT = Spec(
    "findmnt",
    "-s|--fstab -m|--mtab -k|--kernel -p|--poll[=] -w|--timeout= -A|--all -a|--ascii -b|--bytes "
    "-C|--nocanonicalize -c|--canonicalize -D|--df -d|--direction= -e|--evaluate -F|--tab-file= "
    "-f|--first-only -i|--invert -J|--json -l|--list -N|--task= -n|--noheadings -O|--options= -o|--output= "
    "--output-all -P|--pairs --pseudo --shadowed -R|--submounts -r|--raw --real -S|--source= -T|--target= "
    "--tree -M|--mountpoint= -t|--types= -U|--uniq -u|--notruncate -v|--nofsroot -y|--shell -x|--verify "
    "--verbose --vfs-all -h|--help -V|--version -I|--dfi --id= --uniq-id= -Q|--filter= -H|--list-columns "
    "--hyperlink[=]",
)


def _findmnt_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return _reads_file(an, cmd, parsed, "--tab-file")


# util-linux mount lists the mounted filesystems when given nothing to mount: `mount`, `mount -l`,
# `mount -t TYPE` (the mounts of that type). Everything else mounts, remounts or moves.
MOUNT = Spec(
    "mount",
    "-a|--all!mount -c|--no-canonicalize -f|--fake -F|--fork -T|--fstab= -i|--internal-only -l|--show-labels "
    "-m|--mkdir[=] -n|--no-mtab --options-mode= --options-source= --options-source-force -o|--options= "
    "-O|--test-opts= -r|--read-only -t|--types= --source= --target= --target-prefix= -v|--verbose "
    "-w|--rw|--read-write -N|--namespace= -h|--help -V|--version -L|--label= -U|--uuid= -B|--bind!mount "
    "-M|--move!mount -R|--rbind!mount --make-shared!mount --make-slave!mount --make-private!mount "
    "--make-unbindable!mount --make-rshared!mount --make-rslave!mount --make-rprivate!mount "
    "--make-runbindable!mount -s --map-users= --map-groups= --onlyonce",
    effects={"mount": Effect(MUTATING, "attaches or moves filesystems")},
)
_MOUNT_LISTING = ("-l", "-t", "-h", "-V", "-v")


def _mount_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands or any(u.option.names[0] not in _MOUNT_LISTING for u in parsed.used):
        an.add(MUTATING, "mutating:mount", "`mount` attaches a filesystem")
        return False
    return True


@_handles("mount")
def _mount(an: Analysis, cmd: _Cmd) -> None:
    parsed = MOUNT.parse(cmd.args)
    if parsed.unknown:  # mount's reason matters more than the option it did not know
        an.add(MUTATING, "mutating:mount", "`mount` attaches a filesystem")
        return
    judge_by_spec(an, cmd, MOUNT, _mount_operands)


_HANDLERS["date"] = specified(DATE, _date_operands)
_HANDLERS["hostname"] = specified(HOSTNAME, _hostname_operands)
_HANDLERS["hostnamectl"] = specified(HOSTNAMECTL, _hostnamectl_operands)
_HANDLERS["timedatectl"] = specified(TIMEDATECTL, _timedatectl_operands)
_HANDLERS["dmesg"] = specified(DMESG, _dmesg_operands)
_HANDLERS["sysctl"] = specified(SYSCTL, _sysctl_operands)
_HANDLERS["ulimit"] = specified(ULIMIT, _ulimit_operands)
_HANDLERS["modinfo"] = specified(MODINFO, _modinfo_operands)
_HANDLERS["findmnt"] = specified(FINDMNT, _findmnt_operands)
_HANDLERS["swapon"] = specified(SWAPON, _swapon_operands)
for _name in ("fdisk", "sfdisk", "sgdisk", "gdisk", "cfdisk", "parted"):
    _HANDLERS[_name] = _checked(_partition_check)

SPECS = [DATE, HOSTNAME, HOSTNAMECTL, TIMEDATECTL, DMESG, SYSCTL, ULIMIT, LDD, CRONTAB, DKMS_STATUS, MODPROBE,
         MODINFO, FUSER, FINDMNT, MOUNT, SWAPON]
