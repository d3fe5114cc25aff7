"""Containers and clusters: docker, podman, kubectl."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import _getopt
from agent.safety.classifier.registry import _handles


@_handles("docker", "podman", "nerdctl")
def _docker(an: Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_value="Hcl", long_value={"--host", "--context", "--config", "--log-level",
                                                             "--tlscacert", "--tlscert", "--tlskey"})
    words = [a.text for a in opts.operands if not (a.text or "").startswith("-")]
    groups = {"image", "container", "volume", "network", "system", "compose", "builder", "buildx", "plugin"}
    sub = words[0] if words else None
    action = words[1] if sub in groups and len(words) > 1 else sub
    where = f"{sub} {action}" if action != sub else sub
    if action in ("ps", "images", "version", "info", "inspect", "logs", "ls", "list", "top", "port", "history") and sub != "system":
        an.allow(cmd, f"{cmd.prog} {where}")
    elif action in ("rm", "rmi", "stop", "kill", "prune", "down", "restart", "remove"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{action}", f"`{cmd.prog} {where}` stops or removes containers, images or data")
    else:
        an.add(MUTATING, f"{cmd.prog}:{action or 'unknown'}", f"`{cmd.prog} {where or '...'}` changes containers or images")


@_handles("kubectl")
def _kubectl(an: Analysis, cmd: _Cmd) -> None:
    sub = next((t for t in cmd.texts if t and not t.startswith("-")), None)
    if sub in ("delete", "drain"):
        an.add(DESTRUCTIVE, f"kubectl:{sub}", f"`kubectl {sub}` removes or evicts workloads")
    else:
        an.add(MUTATING, f"kubectl:{sub or 'unknown'}", f"`kubectl {sub or '...'}` talks to a cluster and is not read-only")
