"""Services and logs: systemctl, service, journalctl, loginctl."""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import REMOTE_HOST, Effect, Parsed, Spec
from agent.safety.classifier.registry import _handles, files_read_ok, judge_by_spec

_REMOTE = REMOTE_HOST  # systemd -H / -M
# --image=IMAGE attaches the image to a loop device and mounts it (a dirty journal replays even
# when mounted read-only).
_IMAGE = Effect(MUTATING, "attaches and mounts a disk image")


def _verb_spec_judge(an: Analysis, cmd: _Cmd, spec: Spec, reads: frozenset[str], default: str,
                     not_read: Callable[[Analysis, str], None]) -> None:
    """systemd tools read options anywhere (getopt_long) and take a verb as the first operand."""
    parsed = spec.parse(cmd.args)
    verb = parsed.operands[0].text if parsed.operands else default

    def operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
        if verb in reads:
            return True
        not_read(an, verb or "...")
        return False

    judge_by_spec(an, cmd, spec, operands, label=f"{cmd.prog} {verb or '...'}")


# --------------------------------------------------------------------------- systemctl

SYSTEMCTL = Spec(
    "systemctl",
    "-h|--help --version --system --user -H|--host=!remote -M|--machine=!remote -C|--capsule=!remote "
    "-t|--type= --state= --failed -p|--property= -P= -a|--all -l|--full -r|--recursive --reverse "
    "--with-dependencies --job-mode= -T|--show-transaction --show-types --value --check-inhibitors= -i "
    "--kill-whom= --kill-value= -s|--signal= --what= --now --dry-run -q|--quiet --no-warn --wait --no-block "
    "--no-wall --no-reload --legend= --no-legend --no-pager --no-ask-password --global --runtime -f|--force "
    "--preset-mode= --root= --image=!image --image-policy= -n|--lines= -o|--output= "
    "--firmware-setup!boot --boot-loader-menu=!boot --boot-loader-entry=!boot --reboot-argument= --plain "
    "--timestamp= --read-only --mkdir --marked --irreversible --ignore-dependencies --fail "
    "--ignore-inhibitors --drop-in= --when= --message= --kill-subgroup",
    effects={"remote": _REMOTE, "image": _IMAGE,
             "boot": Effect(MUTATING, "tells the firmware or boot loader what to do at the next boot")},
)
_SYSTEMCTL_READ = frozenset(
    {"status", "is-active", "is-enabled", "is-failed", "is-system-running", "list-units", "list-unit-files",
     "list-sockets", "list-timers", "list-jobs", "list-dependencies", "list-machines", "list-automounts",
     "list-paths", "show", "cat", "show-environment", "get-default"}
)  # not `help`: it runs man(1) on the unit's documentation, with a pager
_SYSTEMCTL_DESTRUCTIVE = frozenset(
    {"stop", "disable", "mask", "restart", "kill", "try-restart", "reload-or-restart", "try-reload-or-restart",
     "condrestart", "force-reload", "isolate", "reboot", "poweroff", "halt", "kexec", "suspend", "hibernate",
     "hybrid-sleep", "suspend-then-hibernate", "emergency", "rescue", "default", "switch-root", "soft-reboot",
     "clean", "exit"}
)


def _systemctl_not_read(an: Analysis, verb: str) -> None:
    if verb in _SYSTEMCTL_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"systemctl:{verb}", f"`systemctl {verb}` stops, disables or restarts services or the machine")
    elif verb == "help":
        an.add(MUTATING, "systemctl:help", "`systemctl help` runs man(1) on the units' documentation, with a pager")
    else:
        an.add(MUTATING, f"systemctl:{verb}", f"`systemctl {verb}` changes service state")


@_handles("systemctl")
def _systemctl(an: Analysis, cmd: _Cmd) -> None:
    verb = next((a.text for a in SYSTEMCTL.parse(cmd.args).operands), "list-units")
    if verb in _SYSTEMCTL_DESTRUCTIVE:  # before the options: `systemctl -H x reboot` is a reboot first
        _systemctl_not_read(an, verb)
        return
    _verb_spec_judge(an, cmd, SYSTEMCTL, _SYSTEMCTL_READ, "list-units", _systemctl_not_read)


# --------------------------------------------------------------------------- service

_SERVICE_DESTRUCTIVE = ("stop", "restart", "force-reload", "try-restart", "condrestart", "force-stop",
                        "--full-restart")


@_handles("service")
def _service(an: Analysis, cmd: _Cmd) -> None:
    """`service NAME ACTION` runs the init script (or systemctl) with ACTION: never read-only, as even
    `status` runs a script the classifier has not read."""
    texts = cmd.texts
    action = texts[1] if len(texts) > 1 else None
    if action in _SERVICE_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"service:{action}", f"`service ... {action}` stops or restarts a service")
    else:
        an.add(MUTATING, f"service:{action or 'unknown'}", "`service` runs an init script, which is not read-only")


# --------------------------------------------------------------------------- journalctl

_JOURNAL_WRITE = Effect(MUTATING, "deletes, rotates, moves or writes journal files")
JOURNALCTL = Spec(
    "journalctl",
    "--system --user -M|--machine=!remote -m|--merge -D|--directory= -i|--file= --root= --image=!image "
    "--image-policy= --namespace= -S|--since= -U|--until= -c|--cursor= --after-cursor= "
    "--cursor-file=!cursor -b|--boot[=] -u|--unit= --user-unit= -t|--identifier= -T|--exclude-identifier= "
    "-p|--priority= --facility= -g|--grep= --case-sensitive[=] -k|--dmesg -o|--output= --output-fields= "
    "-n|--lines[=] -r|--reverse --show-cursor --utc -x|--catalog --no-hostname --no-full -l|--full -a|--all "
    "-f|--follow!follow --no-tail -q|--quiet --no-pager -e|--pager-end --interval= --verify-key= --force "
    "-h|--help --version -N|--fields -F|--field= --list-boots --disk-usage --vacuum-size=!write "
    "--vacuum-files=!write --vacuum-time=!write --verify --sync!write --relinquish-var!write "
    "--smart-relinquish-var!write --flush!write --rotate!write --header --list-catalog --dump-catalog "
    "--update-catalog!write --setup-keys!write --new-id128 --list-namespaces --invocation= -I "
    "--list-invocations --synchronize-on-exit=",
    effects={"remote": _REMOTE, "image": _IMAGE, "write": _JOURNAL_WRITE,
             "cursor": Effect(MUTATING, "writes the cursor of the last entry shown to a file"),
             "follow": Effect(MUTATING, "waits for new entries and never ends; read the last ones with "
                                        "`journalctl -n N --no-pager`")},
)
_LINES = re.compile(r"\+?[0-9]+|all")
_BOOT = re.compile(r"[+-]?[0-9]+|[0-9a-fA-F]{32}([+-][0-9]+)?|all")


def _journalctl_args(args: list[Arg]) -> list[Arg]:
    """journalctl reads `-n 10` and `-b -1` as values of -n and -b (they are optional there): drop them."""
    out: list[Arg] = []
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        out.append(arg)
        text = arg.text or ""
        following = args[index + 1].text if index + 1 < len(args) else None
        if following is None:
            continue
        short = text.startswith("-") and not text.startswith("--") and len(text) > 1
        lines = (text == "--lines" or (short and text.endswith("n"))) and _LINES.fullmatch(following)
        boot = (text == "--boot" or (short and text.endswith("b"))) and _BOOT.fullmatch(following)
        skip = bool(lines or boot)
    return out


def _journalctl_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """Operands are matches (`_PID=1`, `/usr/bin/x`): nothing opened. -D, --file and --root name the
    journal files read."""
    return files_read_ok(an, "journalctl", parsed.values("--directory", "--file", "--root"))


@_handles("journalctl")
def _journalctl(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, _Cmd(cmd.name, cmd.prog, _journalctl_args(cmd.args), cmd.stdin), JOURNALCTL,
                  _journalctl_operands)


# --------------------------------------------------------------------------- loginctl

LOGINCTL = Spec(
    "loginctl",
    "-h|--help --version --no-pager --no-legend --no-ask-password -H|--host=!remote -M|--machine=!remote "
    "-p|--property= -P= -a|--all --value -l|--full --kill-whom= -s|--signal= -n|--lines= -o|--output= "
    "--json= -j",
    effects={"remote": _REMOTE},
)
_LOGINCTL_READ = frozenset({"list-sessions", "session-status", "show-session", "list-users", "user-status",
                            "show-user", "list-seats", "seat-status", "show-seat"})
_LOGINCTL_DESTRUCTIVE = frozenset({"terminate-session", "kill-session", "terminate-user", "kill-user",
                                   "terminate-seat"})


def _loginctl_not_read(an: Analysis, verb: str) -> None:
    if verb in _LOGINCTL_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"loginctl:{verb}", f"`loginctl {verb}` ends sessions or kills their processes")
    else:
        an.add(MUTATING, f"loginctl:{verb}", f"`loginctl {verb}` changes sessions, users or seats")


@_handles("loginctl")
def _loginctl(an: Analysis, cmd: _Cmd) -> None:
    _verb_spec_judge(an, cmd, LOGINCTL, _LOGINCTL_READ, "list-sessions", _loginctl_not_read)


SPECS = [SYSTEMCTL, JOURNALCTL, LOGINCTL]
