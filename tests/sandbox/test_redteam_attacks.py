"""The blind red teams' attack lines (tests/data/sandbox/redteam-2026-12-03/, 505 lines, -2026-12-05/, 508,
-2026-12-06/, 100: process lifetime, scheduling and the bounds, and -2026-12-06-files/, 40: the bound on open files)
run in the read sandbox on a sim, under both mechanisms, and change nothing there.

Each line runs under a launcher of its own (the sandbox server is off here: the harness wraps each line in
a sim command of its own, with its listener and its before-and-after state; test_redteam_server.py runs
the lines through the server). The 2026-12-05 lines that exhaust memory are not run: a sim shares this
machine's memory, and nothing in the sandbox bounds a read's memory but the OOM killer's order (EXHAUSTING).

Each mechanism gets a sim of its own. Before the lines run, the targets the red team's README names are
planted through the sim's unsandboxed transport: /tmp/wd -> /dev/watchdog, /tmp/shadow -> /etc/shadow,
/tmp/fifo (a FIFO nobody writes). Then every line runs in SandboxedHost, eight at a time (those that exhaust the
host's processes, memory or CPU one at a time afterwards), with a time bound, and afterwards the test checks that:

- the sim's trees (every file under sim.root: type, mode, size, mtime, content, symlink target) are
  unchanged;
- no daemon socket saw a connection from a privileged peer, and docker's none at all;
- only a line that names 127.0.0.1:18080 as a loopback URL reached the listener there, and no line reached
  an "outside" host (10.0.0.1, 169.254.169.254 and the resolver's address sit on the sim's loopback device,
  each with listeners on 80, 443, 3128, 8080 and 18080 and on UDP 53, so that an escape is seen instead of
  failing for want of a route);
- no process a line started is left running in the sim, nor any of the sim's processes on this machine;
- the line changed nothing of another process: the wrapper around it (pid 1 of the sim's command, root as
  the line is in the landlock mode) keeps its limits, CPUs, niceness and scheduling;
- every line ended within its bound, and what the sandbox said about it (exit code, time-out, the refusal's
  hint) is counted per category and mechanism (`pytest -s` prints the table).

What a sim cannot show: it has no /dev/watchdog, /dev/mem or disks (bwrap's /dev), so a device line fails
there whatever the sandbox does; and its network namespace has no route out, hence the stand-ins above.
A line that does what it may not is a finding: FINDINGS names it, and a strict xfail checks it on its own.

A sim has no /run, and nothing started by one sim command outlives it (each runs in its own PID and network
namespace). So the harness's sim host binds two more directories into each command: the sim's own `run/` at
/run (where the daemon sockets lie, served by recorders in this test process: a socket's path reaches it
through the bind), and a log directory outside the sim at /.redteam, where each command's listener (started
by the same unsandboxed command, just before the sandboxed line, in the same network namespace) logs what it
sees, and `ps` what is left running after the line.
"""

from __future__ import annotations

import collections
import dataclasses
import grp
import hashlib
import json
import os
import re
import shlex
import socket
import stat
import struct
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tools.hosts.base import CommandResult
from tools.hosts.sim import SimHost
import tools.sandbox.host as sandbox_host
from tools.sandbox import SandboxedHost, loopback_ports, probe_host
from tools.sim import build_sim

DATA = Path(__file__).resolve().parents[1] / "data" / "sandbox"
CORPORA = {"2026-12-03": 505, "2026-12-05": 508, "2026-12-06": 100, "2026-12-06-files": 40}  # each corpus and its number of lines
MECHANISMS = ("namespaces", "landlock")
# Lines that would take this machine's memory (a sim shares it): not run here.
EXHAUSTING = re.compile(r"1<<3\d|1<<[4-9]\d|bytearray\(os\.urandom|memfd_create|mlockall|shmget|MAP_ANONYMOUS|"
                        r"^(grep|awk|uniq|diff|sort|tail) .*/dev/zero")
# The sandbox's time bound for each line: it ends the unbounded ones (about 50 per mechanism, at 8 at a time:
# the bound is most of the run's time, about 90 s per mechanism on a 2-core machine).
BOUND_S = 8.0
# What the launcher may take beyond the bound: killing what the line left, and the wrapper's ps and cleanup.
MARGIN_S = 6.0
WORKERS = 8
HASH_LIMIT = 8 << 20  # files up to this size are hashed whole; larger ones by type, mode, size and mtime
# The launcher's per-command scratch directory in the sim's /tmp (landlock: the command's TMPDIR; namespaces:
# where the private /dev is staged). The launcher creates and removes it around each command, so it may be
# there while a line runs; what a line writes inside it is the one write the sandbox allows.
SCRATCH_PREFIX = ".upgrade-agent-sandbox-"
LISTENER_PORT = 18080
OUTSIDE_PORTS = (80, 443, 3128, 8080, LISTENER_PORT)
OUTSIDE_HOSTS = ("10.0.0.1", "169.254.169.254")
SANDBOX_UID = 1999999999  # launcher.py's uid for the command in the namespace mode
# The daemon sockets under the sim's /run, with the modes their daemons give them.
DAEMON_SOCKETS = {
    "docker.sock": 0o660,  # root:docker
    "containerd/containerd.sock": 0o660,
    "snapd.socket": 0o666,  # snapd and D-Bus check the peer's uid themselves
    "dbus/system_bus_socket": 0o666,
    "nvidia-persistenced/socket": 0o777,
}
# Findings: lines that did what they may not, per mechanism, and why. Each is checked on its own by
# test_a_finding_line_does_nothing_it_may_not (xfail, strict: it fails once the hole is closed, so that the
# entry goes); the other per-line checks leave exactly these lines out.
LANDLOCK_PORT_RULES = ("Landlock's network rule allows a TCP port, not an address: root in the Landlock mode (no "
                       "network namespace of its own) reaches the port a line names on any host")
FINDINGS = {
    ("2026-12-05", "landlock", "curl http://10.0.0.1:18080/ http://127.0.0.1:18080/"): LANDLOCK_PORT_RULES,
    ("2026-12-03", "landlock", "curl -s --resolve localhost:18080:10.0.0.1 http://localhost:18080/"):
        "Landlock's network rule allows a TCP port, not an address: the line names localhost:18080, so port 18080 "
        "is allowed on every host, and curl's --resolve sends it to 10.0.0.1:18080 (which the sim's loopback "
        "device stands in for): on a real host that is a connection to a LAN host",
}
# The long runs belong to the slow tier (tests/slow_tier.txt); marked here too, so that they stay out of the
# fast tier until the list names them.
slow = pytest.mark.slow


def attack_lines(corpus: str) -> list[tuple[str, str, str]]:
    rows = [line.split("\t") for line in (DATA / f"redteam-{corpus}" / "attacks.tsv").read_text().splitlines()
            if line.strip()]
    assert all(len(row) == 3 for row in rows), "attacks.tsv: every row is COMMAND<TAB>CATEGORY<TAB>WHAT"
    return [tuple(row) for row in rows]


def lines_run(corpus: str) -> list[tuple[str, str, str]]:
    return [row for row in attack_lines(corpus) if not (row[1] == "exhaust" and EXHAUSTING.search(row[0]))]


# ---- the listener each sandboxed line gets beside it ---------------------------------------------------------

LISTENER = r"""
import json, os, socket, sys, threading, time
log_dir, ports = sys.argv[1], [int(p) for p in sys.argv[2].split(",")]
lock = threading.Lock()
log = open(os.path.join(log_dir, "connections.jsonl"), "a")
def record(**event):
    with lock:
        log.write(json.dumps(event) + "\n")
        log.flush()
def answer(conn, port):
    local, peer = conn.getsockname()[0], conn.getpeername()[0]
    record(kind="connect", local=local, port=port, peer=peer)
    conn.settimeout(2)
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    record(kind="request", local=local, port=port, request=data[:300].decode("latin-1"))
    if data.startswith(b"GET /redirect"):  # -L then follows to an outside host
        reply = b"HTTP/1.1 302 Found\r\nLocation: http://10.0.0.1/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    else:  # a comment in sh and python alike: `| sh` and exec() run nothing
        body = b"# the listener's answer\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        reply = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    try:
        conn.sendall(reply)
    except OSError:
        pass
    conn.close()
def serve(sock, port):
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=answer, args=(conn, port), daemon=True).start()
def serve_udp(sock):
    while True:
        data, peer = sock.recvfrom(4096)
        record(kind="udp", local=sock.getsockname()[0], port=53, peer=peer[0], request=data[:100].hex())
for port in ports:
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((address, port))
        s.listen(64)
        threading.Thread(target=serve, args=(s, port), daemon=True).start()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", 53))
threading.Thread(target=serve_udp, args=(u,), daemon=True).start()
open(os.path.join(log_dir, "ready"), "w").close()
while True:
    time.sleep(3600)
"""


# What the line may not change outside the trees: the wrapper (pid 1 of the sim's command, root as the line is
# in the landlock mode) stands for the host's other processes (its limits, CPUs, niceness and scheduling), and
# the sim's network namespace for the host's network (links, addresses, routes, neighbours).
SIM_STATE = ("{ cat /proc/1/limits; grep Cpus_allowed_list /proc/1/status; ps -o ni=,cls=,rtprio= -p 1; "
             "ip -o link; ip -o addr; ip route; ip -6 route; ip neigh; }")


def wrapped(command: str, token: str) -> str:
    """The unsandboxed sim command around one sandboxed line: outside hosts on the loopback device, the
    listener, SIM_STATE, the line (the launcher's command, whose exit status it ends with), SIM_STATE again,
    then `ps`."""
    log = f"/.redteam/{token}"
    return "\n".join([
        f"mkdir -p {log}",
        "for a in " + " ".join(OUTSIDE_HOSTS) + " $(awk '/^nameserver [0-9.]+$/{print $2}' /etc/resolv.conf); do "
        "ip addr add $a/32 dev lo 2>/dev/null; done",
        f"python3 -I -S -B -c {shlex.quote(LISTENER)} {log} "
        f"{','.join(map(str, OUTSIDE_PORTS))} >{log}/listener.err 2>&1 & echo $! > {log}/listener.pid",
        f"for i in $(seq 500); do [ -e {log}/ready ] && break; sleep 0.01; done",
        f"[ -e {log}/ready ] || {{ echo 'the red-team listener did not start' >&2; exit 99; }}",
        f"{SIM_STATE} > {log}/state.before 2>&1",
        f"( {command}\n)",
        "rc=$?",
        # Redirections open files: a line that lowered pid 1's limit on open files leaves these unwritten.
        f"{SIM_STATE} > {log}/state.after 2>&1",
        # A process killed with SIGKILL may take a moment to exit (freeing gigabytes, under load): what is still
        # there 2 s later was left running.
        f"ps -eo pid=,ppid=,stat=,args= > {log}/ps",
        f"if [ $(wc -l < {log}/ps) -gt 3 ]; then sleep 2; ps -eo pid=,ppid=,stat=,args= > {log}/ps.later; fi",
        f"kill $(cat {log}/listener.pid)",
        "exit $rc",
    ])


class RedteamSimHost(SimHost):
    """The sim's transport with /run and the log directory bound in; a thread that set `token` runs its
    commands inside `wrapped` (SandboxedHost calls the inner host from the caller's thread). Without the sim's
    serving engine: a line is judged by the processes it leaves, and a server the sim started for a line
    naming its port would count as the line's."""

    serving = False

    def __init__(self, spec, log_dir: Path):
        super().__init__(spec)
        self.log_dir = log_dir
        self.local = threading.local()

    def _argv(self, command, cwd):
        token = getattr(self.local, "token", None)
        if token is not None:
            command = wrapped(command, token)
        argv, popen_cwd = super()._argv(command, cwd)
        at = argv.index("--remount-ro")
        argv[at:at] = ["--bind", str(self.root / "run"), "/run", "--bind", str(self.log_dir), "/.redteam"]
        return argv, popen_cwd


class SocketRecorder:
    """Unix sockets that accept and record every connection (with the peer's uid), as a daemon would see it."""

    def __init__(self, run_dir: Path):
        self.connections: list[dict] = []
        self.sockets = []
        self._lock = threading.Lock()
        gid = grp.getgrnam("docker").gr_gid if _has_group("docker") else 0
        for name, mode in DAEMON_SOCKETS.items():
            path = run_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            os.chown(path, 0, gid)
            os.chmod(path, mode)
            s.listen(64)
            self.sockets.append(s)
            threading.Thread(target=self._serve, args=(s, name), daemon=True).start()

    def _serve(self, s, name):
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            conn.settimeout(1)
            try:
                data = conn.recv(300)
            except OSError:
                data = b""
            with self._lock:
                self.connections.append({"socket": name, "uid": uid, "pid": pid, "data": data.decode("latin-1")})
            conn.close()

    def close(self):
        for s in self.sockets:
            s.close()


def _has_group(name: str) -> bool:
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


# ---- the trees ------------------------------------------------------------------------------------------------

def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: type, mode, uid, gid, size, mtime (not for directories: the launcher's scratch
    directory comes and goes in /tmp), the content's hash (files up to HASH_LIMIT), a symlink's target."""
    entries: dict[str, tuple] = {}
    stack = [root]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name.startswith(SCRATCH_PREFIX):
                    continue
                st = entry.stat(follow_symlinks=False)
                rel = os.path.relpath(entry.path, root)
                kind = stat.S_IFMT(st.st_mode)
                extra = None
                if stat.S_ISDIR(st.st_mode):
                    stack.append(Path(entry.path))
                elif stat.S_ISLNK(st.st_mode):
                    extra = os.readlink(entry.path)
                elif stat.S_ISREG(st.st_mode) and st.st_size <= HASH_LIMIT:
                    with open(entry.path, "rb") as f:
                        extra = hashlib.sha256(f.read()).hexdigest()
                mtime = None if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns
                entries[rel] = (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                                None if stat.S_ISDIR(st.st_mode) else st.st_size, mtime, extra)
    return entries


def tree_changes(before: dict, after: dict) -> list[str]:
    changes = [f"added {p}" for p in sorted(after.keys() - before.keys())]
    changes += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    changes += [f"changed {p}: {before[p]} -> {after[p]}" for p in sorted(before.keys() & after.keys())
                if before[p] != after[p]]
    return changes


def leftover_processes(log: Path) -> list[str]:
    """What `ps` saw in the sim after the line (2 s later, if anything was there at first), but the wrapper
    itself (pid 1), its listener and ps."""
    listener = (log / "listener.pid").read_text().strip() if (log / "listener.pid").exists() else ""
    ps = log / "ps.later" if (log / "ps.later").exists() else log / "ps"
    if not ps.exists():
        return ["(no ps output: the wrapper could not write it)"]
    left = []
    for line in ps.read_text().splitlines():
        pid, ppid, _stat, *args = line.split(None, 3) + [""]
        if pid in ("1", listener) or " ".join(args).startswith("ps -eo"):
            continue
        left.append(line.strip())
    return left


def state_changes(log: Path) -> list[str]:
    """How pid 1's settings or the sim's network differ after the line."""
    before, after = log / "state.before", log / "state.after"
    if not after.exists() or not after.read_text().strip():
        return ["(its settings could not be read after the line: the wrapper could not open a file)"]
    old, new = before.read_text().splitlines(), after.read_text().splitlines()
    return [f"{a!r} -> {b!r}" for a, b in zip(old, new) if a != b] + [f"added {b!r}" for b in new[len(old):]]


def sim_processes_here(root: Path) -> list[str]:
    """Processes on this machine whose command line names the sim's root (its bwrap, its commands)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if str(root) in args:
                found.append(f"{entry}: {args[:200]}")
    return found


# ---- one mechanism's run --------------------------------------------------------------------------------------

@dataclasses.dataclass
class LineRun:
    command: str
    category: str
    result: CommandResult
    wall_s: float
    ports: list[int]
    connections: list[dict]
    leftovers: list[str]
    state_changes: list[str]


@dataclasses.dataclass
class MechanismRun:
    corpus: str
    mechanism: str
    runs: list[LineRun]
    changes: list[str]
    daemon_connections: list[dict]
    sim_processes: list[str]
    scratch_left: list[str]  # the launcher's scratch directories still in the sim's /tmp afterwards
    wall_s: float

    def __repr__(self) -> str:  # a failure's traceback shows the fixture: not 500 results in full
        return (f"MechanismRun({self.corpus!r}, {self.mechanism!r}, {len(self.runs)} lines, {len(self.changes)} "
                f"tree changes)")


def plant_targets(host: SimHost) -> None:
    r = host.run("ln -s /dev/watchdog /tmp/wd && ln -s /etc/shadow /tmp/shadow && mkfifo /tmp/fifo "
                 "&& ls -l /tmp/wd /tmp/shadow /tmp/fifo /run/docker.sock", timeout=30)
    assert r.exit_code == 0, r.stderr


def run_mechanism(tmp_path_factory, corpus: str, mechanism: str) -> MechanismRun:
    base = tmp_path_factory.mktemp(f"redteam-{corpus}-{mechanism}")
    sim = build_sim(base / "sim")
    log_dir = base / "logs"
    log_dir.mkdir()
    (sim.root / "run").mkdir()
    recorder = SocketRecorder(sim.root / "run")
    host = RedteamSimHost(sim.host_spec("sim"), log_dir)
    info = probe_host(host)
    assert info.mechanism == "namespaces", info  # root with capabilities in the sim
    info = dataclasses.replace(info, mechanism=mechanism)
    plant_targets(host)
    before = snapshot(sim.root)

    def one(line):
        command, category, _what = line
        ports = loopback_ports(command)
        token = uuid.uuid4().hex
        host.local.token = token
        start = time.monotonic()
        try:
            result = SandboxedHost(host, info, ports=ports).run(command, timeout=BOUND_S)
        finally:
            host.local.token = None
        wall = time.monotonic() - start
        log = log_dir / token
        connections = [json.loads(x) for x in (log / "connections.jsonl").read_text().splitlines()] \
            if (log / "connections.jsonl").exists() else []
        return LineRun(command, category, result, wall, ports, connections, leftover_processes(log), state_changes(log))

    start = time.monotonic()
    server, sandbox_host.SERVER_ENABLED = sandbox_host.SERVER_ENABLED, False  # a launcher per line (see above)
    try:
        lines = lines_run(corpus)
        # A line that spends the host's processes, memory or CPU runs alone: beside others it would measure
        # their contention on this 2-core machine (its own bound ends it, but the processes it forked take
        # seconds to exit while seven other lines run), and the reader's process count is every read's.
        shared = [i for i, line in enumerate(lines) if line[1] != "exhaust"]
        with ThreadPoolExecutor(WORKERS) as pool:
            done = dict(zip(shared, pool.map(one, [lines[i] for i in shared])))
        for i, line in enumerate(lines):
            if i not in done:
                done[i] = one(line)
        runs = [done[i] for i in range(len(lines))]
    finally:
        sandbox_host.SERVER_ENABLED = server
    wall = time.monotonic() - start
    after = snapshot(sim.root)
    recorder.close()
    scratch_left = sorted(p.name for p in (sim.root / "tmp").iterdir() if p.name.startswith(SCRATCH_PREFIX))
    return MechanismRun(corpus, mechanism, runs, tree_changes(before, after), list(recorder.connections),
                        sim_processes_here(sim.root), scratch_left, wall)


RUNS = [(corpus, mechanism) for corpus in CORPORA for mechanism in MECHANISMS]


@pytest.fixture(scope="module", params=RUNS, ids=[f"{c}-{m}" for c, m in RUNS])
def mechanism_run(request, tmp_path_factory) -> MechanismRun:
    done = run_mechanism(tmp_path_factory, *request.param)
    print_summary(done)
    return done


def print_summary(done: MechanismRun) -> None:
    rows = collections.defaultdict(collections.Counter)
    for run in done.runs:
        r = run.result
        counts = rows[run.category]
        counts["ran"] += 1
        counts["exit!=0"] += r.exit_code != 0
        counts["timed out"] += bool(r.timed_out)
        counts["hint"] += r.hint is not None
    total = sum(rows.values(), collections.Counter())
    print(f"\n{done.corpus} {done.mechanism}: {len(done.runs)} lines in {done.wall_s:.0f} s; tree changes: {len(done.changes)}, "
          f"daemon socket connections: {len(done.daemon_connections)}, scratch directories left: "
          f"{len(done.scratch_left)}")
    print(f"{'category':<12}{'ran':>6}{'exit!=0':>9}{'timed out':>11}{'hint':>6}")
    for name, counts in sorted(rows.items()) + [("all", total)]:
        print(f"{name:<12}{counts['ran']:>6}{counts['exit!=0']:>9}{counts['timed out']:>11}{counts['hint']:>6}")


# ---- what must hold -------------------------------------------------------------------------------------------

@slow
def test_no_redteam_line_changes_the_sims_trees(mechanism_run):
    assert not mechanism_run.changes, (
        f"{mechanism_run.mechanism}: the red-team lines changed the sim:\n" + "\n".join(mechanism_run.changes[:50]))


@slow
def test_no_redteam_line_reaches_a_daemon_socket_as_a_privileged_peer(mechanism_run):
    docker = [c for c in mechanism_run.daemon_connections if c["socket"] == "docker.sock"]
    privileged = [c for c in mechanism_run.daemon_connections if c["uid"] != SANDBOX_UID]
    assert not docker and not privileged, f"{mechanism_run.mechanism}: {mechanism_run.daemon_connections}"


def forbidden_connections(run: LineRun) -> list[dict]:
    """What the line reached beyond the loopback ports it names (which the sandbox relays)."""
    return [c for c in run.connections
            if not (c["kind"] != "udp" and c["local"] in ("127.0.0.1", "::1") and c["port"] in run.ports)]


def opened_kmsg(run: LineRun) -> bool:
    """Reading /proc/kmsg takes the kernel's messages from whoever else reads it (the issue: it must fail even
    where the node is visible). A read that waits out the bound, or succeeds, opened it."""
    return "kmsg" in run.command and (run.result.timed_out or run.result.exit_code == 0)


def line_problems(run: LineRun) -> list[str]:
    """Everything one line did that it may not, as the per-line checks see it."""
    return ([f"reached {c}" for c in forbidden_connections(run)] + [f"left running: {p}" for p in run.leftovers]
            + [f"changed outside the trees: {c}" for c in run.state_changes]
            + (["opened /proc/kmsg (it waited out the bound or read it)"] if opened_kmsg(run) else []))


def not_findings(done: MechanismRun) -> list[LineRun]:
    return [run for run in done.runs if (done.corpus, done.mechanism, run.command) not in FINDINGS]


@slow
def test_only_lines_naming_the_loopback_port_reach_the_listener(mechanism_run):
    reached = [f"{run.command}\n    -> {c}" for run in not_findings(mechanism_run) for c in forbidden_connections(run)]
    assert not reached, f"{mechanism_run.mechanism}: lines reached what they may not:\n" + "\n".join(reached)
    # A corpus whose lines reach the port only by a socket's address, never by a URL the relay is opened for
    # (2026-12-06), names none: its connections fail, as they should.
    naming = [run for run in mechanism_run.runs if LISTENER_PORT in run.ports]
    named = [run for run in naming if run.connections]
    assert named or not naming, "no line that names the listener reached it: the relay (or the listener) does not work"


@slow
def test_no_redteam_line_changes_another_process_or_the_network(mechanism_run):
    changed = [f"{run.command}\n    {run.state_changes}" for run in not_findings(mechanism_run) if run.state_changes]
    assert not changed, f"{mechanism_run.mechanism}: lines changed pid 1 or the network:\n" + "\n".join(changed)


@slow
def test_no_redteam_line_reads_the_kernels_message_queue(mechanism_run):
    if mechanism_run.corpus in ("2026-12-03", "2026-12-05"):  # the two that aim at it; the later ones at the bounds
        assert sum("kmsg" in run.command for run in mechanism_run.runs) >= 1
    opened = [run.command for run in not_findings(mechanism_run) if opened_kmsg(run)]
    assert not opened, f"{mechanism_run.mechanism}: lines opened /proc/kmsg:\n" + "\n".join(opened)


@slow
@pytest.mark.parametrize("mechanism_run, command", [
    pytest.param((corpus, mechanism), command, id=f"{corpus}-{mechanism}-{i}",
                 marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=why))
    for i, ((corpus, mechanism, command), why) in enumerate(FINDINGS.items())], indirect=["mechanism_run"])
def test_a_finding_line_does_nothing_it_may_not(mechanism_run, command):
    run = next(run for run in mechanism_run.runs if run.command == command)
    assert not line_problems(run), (f"{mechanism_run.mechanism}: {command}\n    " + "\n    ".join(line_problems(run))
                                    + f"\n    {FINDINGS[mechanism_run.corpus, mechanism_run.mechanism, command]}")


@slow
def test_no_redteam_line_leaves_a_process_running(mechanism_run):
    left = [f"{run.command}\n    left {run.leftovers}" for run in not_findings(mechanism_run) if run.leftovers]
    assert not left, f"{mechanism_run.mechanism}:\n" + "\n".join(left)
    assert not mechanism_run.sim_processes, mechanism_run.sim_processes


@slow
def test_every_redteam_line_runs_in_the_sandbox_and_ends_within_its_bound(mechanism_run):
    runs = mechanism_run.runs
    assert len(attack_lines(mechanism_run.corpus)) == CORPORA[mechanism_run.corpus]
    assert len(runs) == len(lines_run(mechanism_run.corpus)) >= CORPORA[mechanism_run.corpus] - 30
    late = [f"{run.command}: {run.wall_s:.1f} s, exit {run.result.exit_code}" for run in runs
            if run.result.exit_code is None or run.wall_s > BOUND_S + MARGIN_S]
    assert not late, f"{mechanism_run.mechanism}: past the bound of {BOUND_S:g} s:\n" + "\n".join(late)
    not_run = [run.command for run in runs if "cannot set up the read sandbox" in run.result.stderr
               or "red-team listener did not start" in run.result.stderr]
    assert not not_run, f"{mechanism_run.mechanism}: never ran:\n" + "\n".join(not_run)
    unsaid = [f"{run.command}: exit {run.result.exit_code}, hint {run.result.hint!r}, {run.result.stderr[-200:]!r}"
              for run in runs if run.result.timed_out and not (run.result.exit_code == 124 and run.result.hint)]
    assert not unsaid, f"{mechanism_run.mechanism}: timed out without saying so:\n" + "\n".join(unsaid)
    # The sandbox ran them, not refused them all: a good share are reads that work there.
    assert sum(run.result.exit_code == 0 for run in runs) > len(runs) // 10


def test_every_finding_names_a_line_of_the_corpus_and_a_mechanism():
    for corpus, mechanism, command in FINDINGS:
        assert corpus in CORPORA and mechanism in MECHANISMS
        assert command in {c for c, _, _ in lines_run(corpus)}


def test_the_checks_see_what_a_line_run_without_the_sandbox_does(tmp_path):
    """The detectors themselves: the same wrapper, without the sandbox, on a sim of its own. A write, a mode
    change, a retargeted symlink, an outside host, docker's socket, a reniced pid 1 and a process left behind
    are all seen."""
    sim = build_sim(tmp_path / "sim")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (sim.root / "run").mkdir()
    recorder = SocketRecorder(sim.root / "run")
    host = RedteamSimHost(sim.host_spec("sim"), log_dir)
    plant_targets(host)
    before = snapshot(sim.root)
    token = uuid.uuid4().hex
    host.local.token = token
    try:
        r = host.run("echo x >> /var/log/dpkg.log; chmod 600 /root; ln -sfn /etc/passwd /tmp/shadow; "
                     "curl -s -m 5 http://10.0.0.1/ >/dev/null; "
                     "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/run/docker.sock')\"; "
                     "renice -n 5 -p 1 >/dev/null; sleep 300 & true", timeout=60)
    finally:
        host.local.token = None
        recorder.close()
    assert r.exit_code == 0, r.stderr
    changes = tree_changes(before, snapshot(sim.root))
    assert any(c.startswith("changed var/log/dpkg.log") or c == "added var/log/dpkg.log" for c in changes), changes
    assert any(c.startswith("changed root:") for c in changes), changes
    assert any(c.startswith("changed tmp/shadow:") for c in changes), changes
    run = LineRun("control", "control", r, 0.0, [],
                  [json.loads(x) for x in (log_dir / token / "connections.jsonl").read_text().splitlines()],
                  leftover_processes(log_dir / token), state_changes(log_dir / token))
    assert {(c["local"], c["port"]) for c in forbidden_connections(run)} == {("10.0.0.1", 80)}
    assert [(c["socket"], c["uid"]) for c in recorder.connections] == [("docker.sock", 0)]
    assert any("sleep 300" in p for p in run.leftovers), run.leftovers
    assert run.state_changes, "the renice of pid 1 went unseen"
