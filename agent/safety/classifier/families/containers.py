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


# kubectl's read verbs ask the API server of the cluster the operator's kubeconfig names, as squeue asks
# slurmctld: they GET and print. Not read-only: another server, kubeconfig, identity or credentials
# (-s, --kubeconfig, --token, --as...), files it reads or writes (-f, -k, --log-file, --profile-output,
# --cache-dir, a template file), `--raw` (a GET on any path, proxies to a pod's endpoints included),
# secrets (credentials into the transcript), and reads that never end (-w, logs -f, rollout status
# without a timeout). Options are matched by full name (pflag) and may follow the verb.
_KUBECTL_VALUED_OK = {"-n", "--namespace", "--context", "-l", "--selector", "-o", "--output", "--field-selector",
                      "-L", "--label-columns", "--sort-by", "--chunk-size", "--tail", "--since", "--since-time",
                      "-c", "--container", "--timeout", "--revision", "--request-timeout", "--max-log-requests",
                      "--limit-bytes", "--subresource", "--api-group", "--verbs", "--api-version", "-v", "--v",
                      "--template", "--show-events", "--pod-running-timeout", "--output-watch-events", "--watch"}
_KUBECTL_FLAGS_OK = {"-A", "--all-namespaces", "--show-labels", "--no-headers", "--all-containers", "--prefix",
                     "--timestamps", "-p", "--previous", "--containers", "--use-protocol-buffers", "--ignore-errors",
                     "--show-managed-fields", "--ignore-not-found", "--server-print", "--show-kind", "--list",
                     "--namespaced", "--cached", "--client", "--recursive", "--allow-missing-template-keys",
                     "--insecure-skip-tls-verify-backend", "--sum", "--no-stream", "-h", "--help"}
_KUBECTL_VALUED = {"-s", "--server", "--kubeconfig", "--token", "--cluster", "--user", "--as", "--as-group",
                   "--as-uid", "--username", "--password", "--certificate-authority", "--client-certificate",
                   "--client-key", "--tls-server-name", "--cache-dir", "--profile", "--profile-output", "-f",
                   "--filename", "-k", "--kustomize", "--log-file", "--raw", "--log-dir", "--selector-file"}
_KUBECTL_READS = {"get", "describe", "logs", "top", "version", "api-resources", "api-versions", "explain",
                  "cluster-info", "auth can-i", "auth whoami", "rollout history", "rollout status"}
_KUBECTL_GROUPS = {"auth", "rollout", "config", "certificate", "set", "create", "apply", "cluster-info"}


def _kubectl_words(args: list) -> tuple[list[str | None], list[tuple[str, str | None]]]:
    """kubectl's operands and options, options with their values ("--tail=200" and "--tail 200" alike)."""
    operands, options = [], []
    index = 0
    while index < len(args):
        text = args[index].text
        if text is None:
            operands.append(None)
        elif text == "--":
            operands.extend(a.text for a in args[index + 1:])
            break
        elif text.startswith("-") and len(text) > 1:
            name, equals, value = text.partition("=")
            found: str | None = value if equals else None
            if not equals and (name in _KUBECTL_VALUED_OK or name in _KUBECTL_VALUED) and name != "--watch":
                found = args[index + 1].text if index + 1 < len(args) else None
                index += 1
            elif not equals and not name.startswith("--") and len(name) > 2 and "-" + name[1] in _KUBECTL_VALUED_OK:
                name, found = "-" + name[1], name[2:]  # `-nserving`
            options.append((name, found))
        else:
            operands.append(text)
        index += 1
    return operands, options


def _kubectl_read_problem(verb: str, operands: list[str | None], options: list[tuple[str, str | None]]) -> str | None:
    """Why these words are not a read of the operator's cluster, or None."""
    for name, value in options:
        if name in _KUBECTL_VALUED:
            return f"`kubectl {name}` points kubectl at another server, identity, file or path than the read"
        if name not in _KUBECTL_VALUED_OK and name not in _KUBECTL_FLAGS_OK:
            return f"`kubectl {name}` is an option the classifier does not list as a read"
        if name in ("-o", "--output") and value is not None and "-file" in value.split("=", 1)[0]:
            return f"`kubectl -o {value}` reads its template from a file"
        if name == "--template" and value is not None and "/" in value and " " not in value:
            return "`kubectl --template` names a file"
        if name in ("-w", "--watch", "--watch-only") and (value is None or value == "true") or name == "-f":
            return "`kubectl -w` / `logs -f` keeps running; read once"
    if any(word is None for word in operands):
        return "a word known only at run time"
    resources = [part.split("/", 1)[0].split(".", 1)[0] for word in operands[len(verb.split()):]
                 for part in (word or "").split(",")]
    if verb in ("get", "describe") and any(r in ("secret", "secrets") for r in resources):
        return "reading secrets puts credentials into the transcript"
    if verb == "rollout status" and not any(name == "--timeout" for name, _ in options):
        return "`kubectl rollout status` waits until the rollout ends; give it a --timeout"
    if verb == "cluster-info" and operands[1:2] == ["dump"]:
        return "`kubectl cluster-info dump` dumps the whole cluster, to files with --output-directory"
    return None


@_handles("kubectl")
def _kubectl(an: Analysis, cmd: _Cmd) -> None:
    operands, options = _kubectl_words(cmd.args)
    sub = operands[0] if operands else None
    verb = f"{sub} {operands[1]}" if sub in _KUBECTL_GROUPS and len(operands) > 1 and operands[1] else sub
    if sub in ("delete", "drain"):
        an.add(DESTRUCTIVE, f"kubectl:{sub}", f"`kubectl {sub}` removes or evicts workloads")
        return
    if verb not in _KUBECTL_READS:
        an.add(MUTATING, f"kubectl:{sub or 'unknown'}", f"`kubectl {verb or '...'}` changes the cluster or is not a "
                                                        f"read the classifier knows")
        return
    problem = _kubectl_read_problem(verb, operands, options)
    if problem is not None:
        an.add(MUTATING, f"kubectl:{sub}", f"`kubectl {verb}` is not read-only here: {problem}")
        return
    an.allow(cmd, f"kubectl {verb}")


SPECS = [DOCKER, PODMAN, NERDCTL, *{id(s): s for s in _SUBS["docker"].values()}.values()]
