"""Services and logs: systemctl, service, journalctl."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import _abbreviates, _getopt, _long_options
from agent.safety.classifier.registry import _handles

_SYSTEMCTL_READ = frozenset(
    {"status", "is-active", "is-enabled", "is-failed", "is-system-running", "list-units", "list-unit-files",
     "list-sockets", "list-timers", "list-jobs", "list-dependencies", "list-machines", "list-automounts",
     "list-paths", "show", "cat", "help", "show-environment", "get-default"}
)
_SYSTEMCTL_DESTRUCTIVE = frozenset(
    {"stop", "disable", "mask", "restart", "kill", "try-restart", "reload-or-restart", "try-reload-or-restart",
     "condrestart", "force-reload", "isolate", "reboot", "poweroff", "halt", "kexec", "suspend", "hibernate",
     "hybrid-sleep", "suspend-then-hibernate", "emergency", "rescue", "default", "switch-root", "soft-reboot",
     "clean", "exit"}
)


@_handles("systemctl")
def _systemctl(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="tpsHMnoP",
        long_value={"--type", "--property", "--signal", "--host", "--machine", "--lines", "--output", "--state",
                    "--root", "--kill-whom", "--kill-value", "--job-mode", "--what", "--timestamp", "--preset-mode",
                    "--message", "--image", "--drop-in", "--when", "--reboot-argument"},
        permute=True,
    )
    sub = opts.operands[0].text if opts.operands else None
    if not opts.operands or sub in _SYSTEMCTL_READ:
        an.allow(cmd, f"systemctl {sub or 'list-units'}")
    elif sub in _SYSTEMCTL_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"systemctl:{sub}", f"`systemctl {sub}` stops, disables or restarts services or the machine")
    else:
        an.add(MUTATING, f"systemctl:{sub or 'unknown'}", f"`systemctl {sub or '...'}` changes service state")


@_handles("service")
def _service(an: Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    action = texts[1] if len(texts) > 1 else None
    if action in ("stop", "restart", "force-reload", "try-restart", "condrestart", "force-stop"):
        an.add(DESTRUCTIVE, f"service:{action}", f"`service ... {action}` stops or restarts a service")
    else:
        an.add(MUTATING, f"service:{action or 'unknown'}", "`service` runs an init script, which is not read-only")


_JOURNALCTL_WRITES = ("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush", "--sync",
                      "--relinquish-var", "--smart-relinquish-var", "--setup-keys", "--update-catalog",
                      "--cursor-file")


@_handles("journalctl")
def _journalctl(an: Analysis, cmd: _Cmd) -> None:
    for name in _long_options(cmd.args):
        full = next((f for f in _JOURNALCTL_WRITES if f == name or _abbreviates(name, f)), None)
        if full is not None:
            an.add(MUTATING, f"journalctl:{full}", f"`journalctl {full}` deletes, rotates or writes journal files")
            return
    an.allow(cmd)
