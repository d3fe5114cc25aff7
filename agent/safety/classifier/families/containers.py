"""Containers and clusters: docker, podman, nerdctl, kubectl."""

from __future__ import annotations

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import Effect, Spec
from agent.safety.classifier.registry import _handles, judge_by_spec

# Global options come before the subcommand (cobra stops at it) and are matched by full name (pflag).
_REMOTE = Effect(MUTATING, "talks to another (possibly remote) daemon than the local one, beyond what the "
                           "classifier can see")
_CONFIG = Effect(MUTATING, "reads a client configuration that can name credential helpers and plugins to run")
_RUNS = Effect(MUTATING, "names programs the engine runs (hooks, runtimes, conmon, network tools)")
_STORAGE = Effect(MUTATING, "points the engine at other storage or state, which it may create or migrate")
_WRITES = Effect(MUTATING, "writes the output to a file")

DOCKER = Spec(
    "docker",
    "--config=!config -c|--context=!remote -D|--debug -H|--host=!remote -l|--log-level= --tls!remote "
    "--tlscacert=!remote --tlscert=!remote --tlskey=!remote --tlsverify!remote -v|--version -h|--help",
    style="exact", stop_at_operand=True, effects={"config": _CONFIG, "remote": _REMOTE},
)
PODMAN = Spec(
    "podman",
    "--cdi-spec-dir=!runs --cgroup-manager=!storage --config=!config --conmon=!runs -c|--connection=!remote "
    "--db-backend=!storage --events-backend= --hooks-dir=!runs --identity=!remote --imagestore=!storage "
    "--log-level= --module=!config --network-cmd-path=!runs --network-config-dir=!runs --noout --out=!write "
    "-r|--remote!remote --root=!storage --runroot=!storage --runtime=!runs --runtime-flag=!runs "
    "--ssh=!remote --storage-driver=!storage --storage-opt=!storage --syslog --tmpdir=!storage "
    "--transient-store!storage --url=!remote --volumepath=!storage -v|--version -h|--help --debug|-D",
    style="exact", stop_at_operand=True, help=(),
    effects={"runs": _RUNS, "storage": _STORAGE, "config": _CONFIG, "remote": _REMOTE, "write": _WRITES},
)
NERDCTL = Spec(
    "nerdctl", "-n|--namespace= --debug --debug-full -v|--version -h|--help",
    style="exact", stop_at_operand=True, help=(),
)

# The read-only subcommands and their options (by their place: `ps` is also `container ls`).
_DOCKER_SUBS = {
    "ps": "-a|--all -f|--filter= --format= -n|--last= -l|--latest --no-trunc -q|--quiet -s|--size",
    "images": "-a|--all --digests -f|--filter= --format= --no-trunc -q|--quiet --tree",
    "info": "-f|--format=",
    "version": "-f|--format=",
    "inspect": "-f|--format= -s|--size --type=",
    "logs": "--details -f|--follow --since= -n|--tail= -t|--timestamps --until=",
    "stats": "-a|--all --format= --no-stream --no-trunc",
    "history": "--format= -H|--human --no-trunc --platform= -q|--quiet",
    "top": "",
    "port": "",
    "system df": "--format= -v|--verbose",
    "image inspect": "-f|--format= --platform=",
    "container inspect": "-f|--format= -s|--size",
    "volume ls": "--cluster -f|--filter= --format= -q|--quiet",
    "volume inspect": "-f|--format=",
    "network ls": "-f|--filter= --format= --no-trunc -q|--quiet",
    "network inspect": "-f|--format= -v|--verbose",
    "context ls": "--format= -q|--quiet",
}
_PODMAN_SUBS = {
    "ps": "-a|--all --external -f|--filter= --format= -n|--last= -l|--latest --noheading --no-trunc -p|--pod "
          "-q|--quiet -s|--size --sort= -w|--watch= --ns",
    "images": "-a|--all --digests -f|--filter= --format= --history --no-trunc -n|--noheading -q|--quiet --sort=",
    "info": "-f|--format= -D|--debug",
    "version": "-f|--format=",
    "inspect": "-f|--format= -l|--latest -s|--size -t|--type=",
    "logs": "--color -f|--follow -l|--latest -n|--names --since= --tail= -t|--timestamps --until=",
    "stats": "-a|--all --format= -i|--interval= -l|--latest --no-reset --no-stream --no-trunc",
    "history": "--format= -H|--human --no-trunc -q|--quiet",
    "port": "-a|--all -l|--latest",
    "system df": "--format= -v|--verbose",
    "image inspect": "-f|--format=",
    "container inspect": "-f|--format= -l|--latest -s|--size",
    "volume ls": "-f|--filter= --format= -n|--noheading -q|--quiet",
    "network ls": "-f|--filter= --format= --no-trunc -q|--quiet",
}
_SAME = {"container ls": "ps", "container list": "ps", "container ps": "ps", "image ls": "images",
         "image list": "images", "system info": "info", "container logs": "logs", "container stats": "stats",
         "image history": "history", "container top": "top", "container port": "port"}


def _sub_specs(program: str, table: dict[str, str], checked: bool) -> dict[str, Spec]:
    specs = {}
    for where, options in table.items():
        specs[where] = Spec(program, f"{options} --help".strip(), style="exact", label=where,
                            help=((*where.split(), "--help"),) if checked else ())
    for alias, where in _SAME.items():
        if where in specs:
            specs[alias] = specs[where]
    return specs


_SUBS = {"docker": _sub_specs("docker", _DOCKER_SUBS, True), "podman": _sub_specs("podman", _PODMAN_SUBS, False),
         "nerdctl": _sub_specs("nerdctl", _DOCKER_SUBS, False)}
_GLOBALS = {"docker": DOCKER, "podman": PODMAN, "nerdctl": NERDCTL}
_GROUPS = {"image", "container", "volume", "network", "system", "compose", "builder", "buildx", "plugin", "context",
           "pod", "machine", "generate", "kube", "secret", "manifest"}


@_handles("docker", "podman", "nerdctl")
def _docker(an: Analysis, cmd: _Cmd) -> None:
    parsed = _GLOBALS[cmd.prog].parse(cmd.args)
    words = [a.text for a in parsed.operands]
    sub = words[0] if words else None
    action = words[1] if sub in _GROUPS and len(words) > 1 else sub
    where = f"{sub} {action}" if action != sub else sub
    if action in ("rm", "rmi", "stop", "kill", "prune", "down", "restart", "remove", "reset"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{action}", f"`{cmd.prog} {where}` stops or removes containers, images or data")
        return
    spec = _SUBS[cmd.prog].get(where or "")
    if spec is None:
        an.add(MUTATING, f"{cmd.prog}:{action or 'unknown'}", f"`{cmd.prog} {where or '...'}` changes containers or images")
        return
    # The global options first (a remote daemon, another configuration), then the subcommand's own.
    if parsed.unknown or parsed.effects:
        options = _Cmd(cmd.name, cmd.prog, cmd.args[:len(cmd.args) - len(parsed.operands)], cmd.stdin)
        judge_by_spec(an, options, _GLOBALS[cmd.prog], lambda an, cmd, parsed: False, label=cmd.prog)
        return
    rest = parsed.operands[len(where.split()):]

    def operands(an: Analysis, sub_cmd: _Cmd, sub: object) -> bool:
        if where in ("stats", "container stats") and not any(a.text == "--no-stream" for a in rest):
            an.add(MUTATING, f"{cmd.prog}:stats", f"`{cmd.prog} stats` without --no-stream keeps running")
            return False
        return True

    judge_by_spec(an, _Cmd(cmd.name, cmd.prog, rest, cmd.stdin), spec, operands, label=f"{cmd.prog} {where}")


@_handles("kubectl")
def _kubectl(an: Analysis, cmd: _Cmd) -> None:
    """kubectl talks to a cluster: never read-only here. Its global options' values are skipped to
    find the verb (`kubectl -n get delete pod x` deletes)."""
    texts = cmd.texts
    valued = {"-n", "--namespace", "-s", "--server", "--context", "--cluster", "--user", "--kubeconfig",
              "--token", "-l", "--selector", "-o", "--output", "--as", "--as-group", "--request-timeout",
              "--certificate-authority", "--client-certificate", "--client-key", "-v", "--v"}
    sub = None
    index = 0
    while index < len(texts):
        text = texts[index]
        if text in valued:
            index += 2
            continue
        if text and not text.startswith("-"):
            sub = text
            break
        index += 1
    if sub in ("delete", "drain"):
        an.add(DESTRUCTIVE, f"kubectl:{sub}", f"`kubectl {sub}` removes or evicts workloads")
    else:
        an.add(MUTATING, f"kubectl:{sub or 'unknown'}", f"`kubectl {sub or '...'}` talks to a cluster and is not read-only")


SPECS = [DOCKER, PODMAN, NERDCTL, *{id(s): s for s in _SUBS["docker"].values()}.values()]
