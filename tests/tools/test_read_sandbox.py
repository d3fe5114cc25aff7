"""The read sandbox's properties, checked by the kernel's answers on each transport and mechanism.

Each property runs on this machine (local), through a real sshd on 127.0.0.1 (ssh) and on a sim, under
the mechanism the probe picks (namespaces: the tests run as root) and under Landlock, forced. Each test
also runs the same command without the sandbox and sees it do what the sandbox refuses, so a wrapper that
stopped wrapping fails here.

A sim runs every command in a machine of its own (its own pid, network and UTS namespaces): what a
sandboxed command should see, or must not harm, is set up in the same command, before the launcher
(`around`). Commands that could change this machine if the sandbox failed are written so that even then
they change nothing: the hostname is set to itself, devices are only opened read-only, never read.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools.hosts import Host, HostSpec, LocalHost, SimHost
from tools.sandbox import SandboxedHost, SandboxInfo, probe_host, sandbox_refusal
from tools.sandbox.host import SANDBOX_STATUS
from tools.sandbox.launcher import READ_OPEN_FILES
from tools.sim import build_sim

TRANSPORTS = ("local", "ssh", "sim")
MECHANISMS = ("namespaces", "landlock")
HARMLESS_DEV = {"null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "shm", "pts"}
RC = "sandbox-rc="

LANDLOCK_LISTS_DEV = ("Landlock cannot hide directory entries: `ls /dev` lists every node of the host (or the sim), "
                      "though none but the harmless ones can be opened")

LANDLOCK_ROOT_PORTS = ("root in the Landlock mode (no CAP_SYS_ADMIN: no network namespace of its own) keeps Landlock's "
                       "port rules, which name a port, not an address: the same port on a non-loopback address is "
                       "reachable. A user namespace would give it one, and take away its right to read every file; "
                       "a user who is not root gets one (test_a_user_who_is_not_root_reaches_only_loopback)")


@dataclass
class Target:
    """One transport under one mechanism; `inside` is a writable directory of the test's as commands see it,
    `here` the same directory from this process."""

    transport: str
    mechanism: str
    host: Host
    info: SandboxInfo
    inside: str
    here: Path
    device: str  # a device node the transport's /dev has and the sandbox must not open

    def sandboxed(self, ports: list[int] | None = None) -> SandboxedHost:
        return SandboxedHost(self.host, dataclasses.replace(self.info, mechanism=self.mechanism), ports=ports)

    def path(self, name: str) -> tuple[str, Path]:
        return f"{self.inside}/{name}", self.here / name


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return build_sim(tmp_path_factory.mktemp("sandbox-sim") / "gpu")


@pytest.fixture(scope="module")
def sim_host(sim):
    return SimHost(sim.host_spec())


_probed: dict[str, SandboxInfo] = {}


def _info(transport: str, host: Host) -> SandboxInfo:
    if transport not in _probed:
        _probed[transport] = probe_host(host)
    return _probed[transport]


@pytest.fixture
def target(request, tmp_path) -> Target:
    transport, mechanism = request.param
    if transport == "sim":
        sim = request.getfixturevalue("sim")
        host = request.getfixturevalue("sim_host")
        name = f"t-{uuid.uuid4().hex[:8]}"  # the sim's /root is its own tree, shared by the module's tests
        here = sim.root / "root" / name
        here.mkdir()
        inside, device = f"/root/{name}", "/dev/ptmx"  # bwrap's /dev: ptmx and core beside the harmless ones
    else:
        if transport == "ssh":
            world = request.getfixturevalue("ssh_world")
            host = world.pool(request.getfixturevalue("ssh_host_spec")).get("box")
        else:
            host = LocalHost(HostSpec(name="l", transport="local"))
        here = tmp_path / "work"
        here.mkdir()
        inside, device = str(here), "/dev/kmsg"  # each open of /dev/kmsg reads on its own: opening changes nothing
    info = _info(transport, host)
    assert info.mechanism == "namespaces", info  # root here, on the sshd's side and in the sim
    return Target(transport, mechanism, host, info, inside, here, device)


def params_for(*transports, xfail: dict[tuple[str, str], str] | None = None):
    out = []
    for t in transports:
        for m in MECHANISMS:
            reason = (xfail or {}).get((t, m)) or (xfail or {}).get(("*", m))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param((t, m), id=f"{t}-{m}", marks=marks))
    return out


ALL = params_for(*TRANSPORTS)


def around(target: Target, sh: SandboxedHost | None, command: str, *, before: str = "", after: str = "",
           timeout: float = 20) -> tuple[str, int, str]:
    """BEFORE, then COMMAND (in the sandbox unless `sh` is None), then AFTER, in one shell on the transport:
    (the command's output, its exit code, AFTER's output)."""
    inner = sh.launcher_line(command, timeout) if sh else f"exec bash --noprofile --norc -c {shlex.quote(command)}"
    script = f"{before}\n( {inner} ) </dev/null; echo \"{RC}$?\"\n{after}"
    r = target.host.run(script, timeout=timeout + 30)
    assert RC in r.stdout, r
    out, _, rest = r.stdout.partition(RC)
    code, _, after_out = rest.partition("\n")
    return out, int(code), after_out


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# A listener the test starts, on the transport: each connection is answered `ok:PORT` (or `ok:unix`), so a
# connection that reached it is told from one that reached the namespace's relay alone.
LISTENER = r"""
import os, select, socket, sys, time
ready, specs = sys.argv[1], sys.argv[2:]
listeners = {}
for spec in specs:
    if spec.startswith("unix:"):
        path = spec[5:]
        if os.path.exists(path):  # an earlier listener's socket file
            os.unlink(path)
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        os.chmod(path, 0o600)
        label = b"unix"
    else:
        addr, port = spec.rsplit(":", 1)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, int(port)))
        label = port.encode()
    s.listen(8)
    listeners[s.fileno()] = (s, label)
open(ready, "w").write("ready")
end = time.time() + 60
while time.time() < end:
    for fd in select.select(list(listeners), [], [], 1)[0]:
        s, label = listeners[fd]
        c, _ = s.accept()
        c.sendall(b"ok:" + label + b"\n")
        c.close()
"""


def start_listener(target: Target, *specs: str) -> tuple[str, str]:
    """The shell that starts the listener before the command (its pid in $LISTENER_PID), and the one that stops it."""
    ready = f"{target.inside}/listener-{uuid.uuid4().hex[:6]}.ready"
    before = (f"rm -f {ready}\n{shlex.quote(target.info.python)} -c {shlex.quote(LISTENER)} {ready} "
              + " ".join(shlex.quote(s) for s in specs)
              + f" >/dev/null 2>&1 & LISTENER_PID=$!\n"
              f"for i in $(seq 200); do [ -s {ready} ] && break; sleep 0.01; done")
    return before, "kill $LISTENER_PID"


def tcp_reach(addr: str, port: int) -> str:
    """A command that prints what the listener at ADDR:PORT answers, or that it could not connect."""
    return (f"if exec 3<>/dev/tcp/{addr}/{port}; then read -t 5 line <&3; echo \"got:$line\"; "
            f"else echo no-connection; fi")


# ---- 1. no write to any file system ----------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_file_of_the_host_cannot_be_written_changed_or_removed(target):
    inside, here = target.path("victim")
    here.write_text("original\n")
    sh = target.sandboxed()
    for command in (f"echo changed > {inside}", f"echo more >> {inside}", f"rm -f {inside}",
                    f"touch {inside}.new", f"mv {inside} {inside}.moved"):
        r = sh.run(command, timeout=20)
        assert r.exit_code != 0, (command, r)
        assert re.search(r"Read-only file system|Permission denied|Operation not permitted", r.stderr), (command, r)
    assert here.read_text() == "original\n"
    assert sorted(p.name for p in target.here.iterdir()) == ["victim"]
    # without the sandbox the same write goes through
    r = target.host.run(f"echo changed > {inside}", timeout=20)
    assert r.exit_code == 0, r
    assert here.read_text() == "changed\n"


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_tmpdir_is_a_private_scratch_that_is_gone_afterwards(target):
    name = f"scratch-{uuid.uuid4().hex[:8]}"
    r = target.sandboxed().run(f'echo hello > "$TMPDIR/{name}" && cat "$TMPDIR/{name}" && echo "$TMPDIR"',
                               timeout=20)
    assert r.exit_code == 0, r
    written, scratch = r.stdout.splitlines()
    assert written == "hello"
    # the file is nowhere on the transport afterwards: neither at the path it had inside nor in /dev/shm
    r = target.host.run(f'for p in "{scratch}/{name}" "/dev/shm/{name}"; do test -e "$p" && echo "left:$p"; done; '
                        f'test -e "{scratch}" && echo "scratch-left"; true', timeout=20)
    if target.mechanism == "landlock":  # its scratch is a directory of the transport's TMPDIR, removed after
        assert scratch.startswith("/tmp/.upgrade-agent-sandbox-") and r.stdout == "", r
    else:  # a tmpfs of the sandbox's own mount namespace at /dev/shm, gone with it
        assert scratch == "/dev/shm" and r.stdout == "scratch-left\n", r
    # without the sandbox a file written to a temporary directory stays
    r = target.host.run(f'echo hello > /tmp/{name} && cat /tmp/{name} && rm /tmp/{name}', timeout=20)
    assert r.stdout == "hello\n", r


# ---- 2. devices ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", params_for(*TRANSPORTS, xfail={("*", "landlock"): LANDLOCK_LISTS_DEV}),
                         indirect=True)
def test_dev_lists_only_the_harmless_nodes(target):
    def listing(host):
        r = host.run("ls -A /dev", timeout=20)
        assert r.exit_code == 0, r
        return {n for n in r.stdout.split() if not n.startswith("nvidia")}

    outside = listing(target.host)
    assert target.device[len("/dev/"):] in outside and outside > HARMLESS_DEV
    assert listing(target.sandboxed()) == HARMLESS_DEV


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_device_node_of_the_host_cannot_be_opened_by_any_path(target):
    link_inside, link_here = target.path("planted")
    link_here.symlink_to(target.device)
    # /proc/$$/root: the shell's own root by its pid (pid 1's may be closed to root itself, as in a VM's init)
    paths = [target.device, "/proc/$$/root" + target.device, "/proc/self/root" + target.device, link_inside]
    # `: < PATH` opens the node read-only and closes it: no byte is read or written
    opened = {path: f": < {path} && echo opened" for path in paths}
    sh = target.sandboxed()
    for path, command in opened.items():
        r = sh.run(command, timeout=20)
        assert r.exit_code != 0 and "opened" not in r.stdout, (path, r)
        assert re.search(r"No such file or directory|Permission denied|Operation not permitted", r.stderr), (path, r)
    for path, command in opened.items():
        r = target.host.run(command, timeout=20)
        assert r.stdout == "opened\n", (path, r)


# ---- 3. privileges ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_the_hostname_cannot_be_set(target):
    # On this machine the "new" name is its own: were the sandbox broken, nothing would change. The sim
    # has a UTS namespace for each command, and takes a real new name.
    new = "renamed-by-a-read" if target.transport == "sim" else "$(hostname)"
    r = target.sandboxed().run(f'hostname "{new}"; echo "rc=$?"; hostname', timeout=20)
    rc, name = r.stdout.split()
    assert rc != "rc=0", r
    assert name != "renamed-by-a-read"
    if target.transport == "sim":
        r = target.host.run(f'hostname "{new}"; echo "rc=$?"; hostname', timeout=20)
        assert r.stdout.split() == ["rc=0", "renamed-by-a-read"], r


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_the_kernel_log_cannot_be_opened(target):
    # The kernel checks the right to read /proc/kmsg when it is opened; `exec 3<` opens it without reading,
    # so no message is taken from the log, here or (if the sandbox failed) inside.
    command = "exec 3< /proc/kmsg && echo opened"
    r = target.sandboxed().run(command, timeout=20)
    assert r.exit_code != 0 and "opened" not in r.stdout, r
    assert "Operation not permitted" in r.stderr or "Permission denied" in r.stderr, r
    assert target.host.run(command, timeout=20).stdout == "opened\n"


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_proc_sys_cannot_be_written(target):
    # the value written is the one already there: a broken sandbox would still change nothing here
    command = "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname && echo written"
    r = target.sandboxed().run(command, timeout=20)
    assert r.exit_code != 0 and "written" not in r.stdout, r
    assert re.search(r"Read-only file system|Permission denied", r.stderr), r
    if target.transport == "sim":
        r = target.host.run(command + "; echo sim-new > /proc/sys/kernel/hostname && hostname", timeout=20)
        assert r.stdout == "written\nsim-new\n", r


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_process_of_the_host_cannot_be_reniced_or_killed(target):
    before = ("sleep 120 >/dev/null 2>&1 & export VICTIM=$!\nsleep 120 >/dev/null 2>&1 & OTHER=$!\n"
              "OLD_NICE=$(ps -o ni= -p $VICTIM | tr -d ' ')")
    command = 'renice -n 7 -p "$VICTIM"; echo "renice=$?"; kill -TERM "$VICTIM"; echo "kill=$?"'
    after = ('sleep 0.1; kill -0 $VICTIM && echo victim-alive; echo "nice=$(ps -o ni= -p $VICTIM | tr -d \' \')'
             ' old=$OLD_NICE"\n'
             # without the sandbox both work on the second sleep
             'renice -n 7 -p $OTHER >/dev/null && echo other-reniced; kill -TERM $OTHER && wait $OTHER 2>/dev/null;'
             ' kill -0 $OTHER 2>/dev/null || echo other-gone\n'
             'kill -KILL $VICTIM')
    out, code, after_out = around(target, target.sandboxed(), command, before=before, after=after)
    assert code == 0
    assert "renice=0" not in out and "kill=0" not in out, out
    lines = after_out.split("\n")
    assert lines[0] == "victim-alive", after_out
    nice, old = lines[1].split()
    assert nice == old.replace("old=", "nice="), after_out
    assert lines[2:4] == ["other-reniced", "other-gone"], after_out


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_another_processs_limits_can_be_read_but_not_set(target):
    # A victim of the same uid as the launcher (root): the landlock mode's command was that uid, and could
    # lower its limits (prlimit --cpu=1:1 kills it). Reading them stays a read.
    before = "sleep 120 >/dev/null 2>&1 & export VICTIM=$!\nsleep 120 >/dev/null 2>&1 & OTHER=$!"
    # (prlimit's read of another uid's limits is the kernel's to refuse; /proc/PID/limits is for all to read)
    command = ('grep "Max open files" /proc/$VICTIM/limits | tr -s " " | cut -d" " -f4; '
               'prlimit --pid "$VICTIM" --nofile=7:7; echo "set=$?"; prlimit --nofile=9:9 true; echo "own=$?"')
    after = ('grep "Max open files" /proc/$VICTIM/limits | tr -s " " | cut -d" " -f4\n'
             'prlimit --pid $OTHER --nofile=7:7 && grep "Max open files" /proc/$OTHER/limits | tr -s " " | cut -d" " -f4\n'
             'kill -KILL $VICTIM $OTHER')
    out, code, after_out = around(target, target.sandboxed(), command, before=before, after=after)
    lines = out.split()
    assert lines[0].isdigit() and "set=0" not in lines and "own=0" in lines, out
    soft, other = after_out.split()[:2]
    assert soft == lines[0] and other == "7", after_out


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_network_link_cannot_be_set(target):
    # `up` on a link that is up: a broken sandbox would still change nothing
    command = "ip link set lo up; echo rc=$?"
    r = target.sandboxed().run(command, timeout=20)
    assert "rc=0" not in r.stdout and "Operation not permitted" in r.stderr, r
    assert target.host.run(command, timeout=20).stdout == "rc=0\n"


# ---- 4. network ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_only_the_named_loopback_ports_are_reachable(target):
    allowed, other = free_ports(2)
    before, after = start_listener(target, f"127.0.0.1:{allowed}", f"127.0.0.1:{other}")
    command = f"{tcp_reach('127.0.0.1', allowed)}; {tcp_reach('127.0.0.1', other)}"
    out, code, _ = around(target, target.sandboxed(ports=[allowed]), command, before=before, after=after)
    assert out.split("\n")[:2] == [f"got:ok:{allowed}", "no-connection"], out
    # no port named: no connection at all
    out, code, _ = around(target, target.sandboxed(), command, before=before, after=after)
    assert out.split("\n")[:2] == ["no-connection", "no-connection"], out
    out, code, _ = around(target, None, command, before=before, after=after)
    assert out.split("\n")[:2] == [f"got:ok:{allowed}", f"got:ok:{other}"], out


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_named_port_nothing_listens_on_refuses_as_it_would_outside(target):
    # The relay listens in the read's network only on the named ports something listens on at the host:
    # a relay that accepted the connection would have to reset it, which reads as a server up but broken.
    (port,) = free_ports(1)
    command = f"{tcp_reach('127.0.0.1', port)}; curl -sS -m 5 http://127.0.0.1:{port}/health; echo curl=$?"
    inside = target.sandboxed(ports=[port]).run(command, timeout=20)
    outside = target.host.run(command, timeout=20)
    assert inside.stdout == outside.stdout == "no-connection\ncurl=7\n", (inside, outside)
    # the host refused it, not the sandbox, and a failed read says so (curl -s says nothing itself)
    failed = target.sandboxed(ports=[port]).run(f"curl -s -m 5 http://127.0.0.1:{port}/health", timeout=20)
    assert failed.exit_code == 7 and failed.hint, failed
    assert failed.hint.startswith("the host itself refused the connection") and f"port {port}" in failed.hint
    # A command that names the port and fails for a reason of its own says that reason: no hint about the port
    # (a benchmark whose stack is broken printed its traceback under "nothing was listening there").
    broken = target.sandboxed(ports=[port]).run(
        f"python3 -c 'raise SystemExit(\"RuntimeError: CUDA version mismatch\")' --port {port}", timeout=20)
    assert broken.exit_code == 1 and "mismatch" in broken.stderr and broken.hint is None, broken


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine's own that is not loopback (the listener binds it: nothing leaves)."""
    r = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    found = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", r.stdout)
    return found[0] if found else None


# The sim's network namespace has only its loopback: no address of it is not loopback.
@pytest.mark.parametrize("target", params_for("local", "ssh", xfail={("*", "landlock"): LANDLOCK_ROOT_PORTS}),
                         indirect=True)
def test_an_address_that_is_not_loopback_is_not_reachable(target):
    address = _non_loopback_address()
    assert address, "this machine has no non-loopback IPv4 address to test with"
    (port,) = free_ports(1)
    before, after = start_listener(target, f"{address}:{port}")
    command = tcp_reach(address, port)
    # the port is named, as a loopback read of it would: still only 127.0.0.1 may be reached
    out, _, _ = around(target, target.sandboxed(ports=[port]), command, before=before, after=after)
    assert out.split("\n")[0] == "no-connection", out
    out, _, _ = around(target, None, command, before=before, after=after)
    assert out.split("\n")[0] == f"got:ok:{port}", out


UNIX_CLIENT = r"""
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
except OSError as e:
    print("socket-refused:%d" % e.errno); sys.exit()
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect-refused:%d" % e.errno); sys.exit()
print("got:" + s.recv(64).decode().strip())
"""


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_root_only_unix_socket_refuses_the_command(target):
    import errno
    path, _ = target.path("daemon.sock")
    before, after = start_listener(target, f"unix:{path}")
    command = f"{shlex.quote(target.info.python)} -c {shlex.quote(UNIX_CLIENT)} {path}"
    out, _, _ = around(target, target.sandboxed(), command, before=before, after=after)
    # root here: in both modes the command is the reader uid, which may make a unix socket (CUDA needs one)
    # and which the daemon refuses; a user who is not root may make none (test_a_user_who_is_not_root_...)
    expected = f"connect-refused:{errno.EACCES}"
    assert out.split("\n")[0] == expected, out
    out, _, _ = around(target, None, command, before=before + f"\nls -l {path}", after=after)
    lines = out.split("\n")
    assert lines[0].startswith("srw------- 1 root root"), out
    assert lines[1] == "got:ok:unix", out


# ---- 5. bounds -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_that_does_not_end_is_stopped_at_its_time_bound(target):
    start = time.monotonic()
    r = target.sandboxed().run("sleep 30", timeout=2)
    took = time.monotonic() - start
    assert took < 5, took
    assert r.exit_code == 124 and r.timed_out, r
    assert SANDBOX_STATUS + "stopped after 2 s" in r.stderr, r
    assert r.hint and "Rerun it bounded" in r.hint, r
    # without the sandbox it is the transport that gives up, and says nothing of a bound
    r = target.host.run("sleep 30", timeout=2)
    assert r.timed_out and r.exit_code != 124 and SANDBOX_STATUS not in r.stderr, r


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_the_bounds_word_is_a_line_of_its_own_after_output_cut_mid_line(target):
    # the caller finds the launcher's word by the start of a line: a command stopped mid-line hid it
    r = target.sandboxed().run("printf 'half a line' >&2; sleep 30", timeout=2)
    assert r.exit_code == 124 and r.stderr.startswith("half a line\n" + SANDBOX_STATUS + "stopped after 2 s"), r
    assert r.hint and "Rerun it bounded" in r.hint, r


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_is_a_session_and_a_scheduling_group_of_its_own(target):
    # field 6 of /proc/PID/stat is the session; /proc/PID/autogroup the kernel's group of a session for its
    # scheduler, where it has one: thousands of processes of a read then share one process's CPU. The parent
    # is the launcher's supervisor (or its relay), in the session the transport gave it.
    command = ('read -r -a f < /proc/$$/stat; read -r -a g < /proc/$PPID/stat; echo "$$ ${f[5]} ${g[5]}"; '
               'cat /proc/$$/autogroup 2>/dev/null || echo none; cat /proc/$PPID/autogroup 2>/dev/null || echo none')
    lines = target.sandboxed().run(command, timeout=20).stdout.splitlines()
    pid, session, parents_session = lines[0].split()
    assert pid == session != parents_session, lines
    if lines[1] != "none":
        assert lines[1].split()[0] != lines[2].split()[0], lines
    # The supervisor, which ends the read at its bound, outranks it where it may (root): a real-time task
    # that mostly sleeps; the read is an ordinary one.
    classes = target.sandboxed().run("ps -o cls= -p $$; ps -o cls= -p $PPID", timeout=20).stdout.split()
    assert classes == ["TS", "RR" if os.geteuid() == 0 else "TS"], classes
    # and it stays one: a new session would leave its kill and take a scheduling share of its own
    leave = "python3 -c 'import os; os.setsid(); print(\"left\")'; true"  # `; true`: bash forks it, not execs
    r = target.sandboxed().run(leave, timeout=20)
    assert "left" not in r.stdout and "Operation not permitted" in r.stderr, r
    assert target.host.run(leave, timeout=20).stdout == "left\n"


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_holds_a_bounded_number_of_open_files(target):
    # Socket and pipe buffers are kernel memory the OOM killer does not count: a read that stuffs socket
    # pairs holds up to two of them per pair, so the number of its open files is what bounds it. It cannot
    # raise the bound again.
    program = ("import socket\nl = []\ntry:\n    while 1:\n        a, b = socket.socketpair(); a.setblocking(0)\n"
               "        try:\n            while 1: a.send(b'x' * 65536)\n"
               "        except BlockingIOError: l.append((a, b))\nexcept OSError as e: print(len(l), e.errno)")
    stuff = "python3 -c " + shlex.quote(program)
    r = target.sandboxed().run(f"ulimit -Sn; ulimit -Hn; ulimit -n 4096; echo raised=$?; {stuff}", timeout=30)
    soft, hard, raised, stuffed = r.stdout.splitlines()
    assert int(soft) == int(hard) <= READ_OPEN_FILES and raised != "raised=0", r
    pairs, code = stuffed.split()
    assert int(pairs) < READ_OPEN_FILES // 2 and code == str(errno.EMFILE), r
    # outside the sandbox, the host's own bound
    assert int(target.host.run("ulimit -Hn", timeout=20).stdout) > READ_OPEN_FILES


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_cannot_take_the_hosts_aio_contexts(target):
    # fs.aio-max-nr is one pool for the whole host: a red team's read took all of it with four io_setup calls
    number = {"x86_64": 206, "aarch64": 0}[os.uname().machine]
    program = ("import ctypes\nl = ctypes.CDLL(None, use_errno=True)\nctx = ctypes.c_ulong(0)\n"
               f"print(l.syscall({number}, 16, ctypes.byref(ctx)), ctypes.get_errno())")
    r = target.sandboxed().run("python3 -c " + shlex.quote(program), timeout=30)
    assert r.stdout.split() == ["-1", str(errno.EPERM)], r
    assert target.host.run("python3 -c " + shlex.quote(program), timeout=30).stdout.split()[0] == "0"


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_endless_output_is_stopped_at_the_output_bound(target, monkeypatch):
    bound = 256 << 10
    monkeypatch.setattr("tools.sandbox.host.MAX_OUTPUT", bound)
    sh = target.sandboxed()
    r = sh.run("cat /dev/zero", timeout=20)
    assert r.exit_code == 125, r.stderr
    assert len(r.stdout) == bound and set(r.stdout) == {"\0"}
    assert f"stopped after {bound} bytes of output" in r.stderr
    over = f"head -c {2 * bound} /dev/zero | wc -c; head -c {2 * bound} /dev/zero"
    assert sh.run(over, timeout=20).exit_code == 125
    r = target.host.run(over, timeout=20)
    assert r.exit_code == 0 and r.stdout.startswith(f"{2 * bound}\n") and len(r.stdout) == 2 * bound + len(
        f"{2 * bound}\n"), len(r.stdout)


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_nothing_the_command_started_is_left_running(target):
    marks = [f"300.{uuid.uuid4().int % 10**6:06d}" for _ in range(2)]
    command = f"sleep {marks[0]} >/dev/null 2>&1 & (setsid sleep {marks[1]} >/dev/null 2>&1 &); echo started"
    # the processes still there afterwards, and then gone (any left over is one of the test's: killed by its pid)
    after = ("for m in " + " ".join(marks) + "; do for p in $(ps -eo pid=,args= | awk -v a=\"sleep $m\" "
             "'substr($0, index($0, $2)) == a {print $1}'); do echo left:$m; kill -KILL $p; done; done")
    out, code, after_out = around(target, target.sandboxed(), command, after=after)
    assert out == "started\n" and code == 0, out
    assert after_out.strip() == "", after_out
    out, code, after_out = around(target, None, command, after=after)
    assert sorted(after_out.split()) == sorted(f"left:{m}" for m in marks), after_out


# ---- 6. reads still work ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_reads_see_the_host_as_it_is(target):
    sh = target.sandboxed()
    release = target.host.run("cat /etc/os-release", timeout=20)
    r = sh.run("cat /etc/os-release", timeout=20)
    assert r.exit_code == 0 and r.stdout == release.stdout and "ID=" in r.stdout, r
    mark = f"77.{uuid.uuid4().int % 10**6:06d}"
    (port,) = free_ports(1)
    listen, stop = start_listener(target, f"127.0.0.1:{port}")
    before = f"{listen}\nsleep {mark} >/dev/null 2>&1 & SLEEPER=$!"
    # pgrep -x on the whole command line: the shell that started the sleeper holds its text too
    command = f"pgrep -fx 'sleep {mark}' | wc -l; ss -ltn | grep -c '127.0.0.1:{port} '"
    for sandbox in (sh, None):
        out, code, _ = around(target, sandbox, command, before=before, after=f"{stop}; kill $SLEEPER")
        assert out.split() == ["1", "1"] and code == 0, (sandbox, out)


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_exit_codes_stdin_cwd_and_env_pass_through(target):
    (target.here / "marker").write_text("")
    for host in (target.sandboxed(), target.host):
        assert host.run("exit 3", timeout=20).exit_code == 3
        assert host.run("tr a-z A-Z", stdin=b"passed in\n", timeout=20).stdout == "PASSED IN\n"
        r = host.run('pwd; ls; echo "$GREETING"', cwd=target.inside, env={"GREETING": "hello there"}, timeout=20)
        assert r.stdout == f"{target.inside}\nmarker\nhello there\n", r


# ---- 7. refusals read as refusals ------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_refused_write_says_it_needs_a_change_and_a_plain_failure_does_not(target):
    inside, here = target.path("victim")
    here.write_text("original\n")
    sh = target.sandboxed()
    refused = sh.run(f"echo changed > {inside}", timeout=20)
    if target.mechanism == "namespaces":
        assert "Read-only file system" in refused.stderr, refused
    hint = sandbox_refusal(refused)
    assert hint and hint.startswith("this needs a change"), refused
    assert refused.hint and "this needs a change" in refused.hint
    for command in (f"ls {target.inside}/nonexistent", "false"):
        r = sh.run(command, timeout=20)
        assert r.exit_code != 0 and sandbox_refusal(r) is None and r.hint is None, r
    # without the sandbox the write succeeds: nothing to explain
    r = target.host.run(f"echo changed > {inside}", timeout=20)
    assert r.exit_code == 0 and sandbox_refusal(r) is None


# ---- a user who is not root (the Landlock mode as most SSH users meet it) --------------------------------------

def test_a_user_who_is_not_root_changes_no_process_of_their_own():
    """As nobody, on this machine: the probe picks Landlock, and the command can neither signal, renice nor
    re-limit the same user's other processes (seccomp's self-only rules; Landlock's signal scope where the
    kernel has it), nor write outside its scratch, nor make a unix socket; without the sandbox, the same
    user does all of it."""
    work = Path(tempfile.mkdtemp(prefix="sandbox-nobody-"))  # pytest's own tmp_path is closed to other users
    work.chmod(0o777)
    host = LocalHost(HostSpec(name="l", transport="local"))
    as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all bash --noprofile --norc -c "
    info = probe_host(LocalHost(HostSpec(name="n", transport="local")))
    sandbox = SandboxedHost(host, dataclasses.replace(info, mechanism="landlock"))
    command = (f'renice -n 5 -p "$VICTIM" >/dev/null; echo "renice=$?"; prlimit --pid "$VICTIM" --nofile=7:7; '
               f'echo "prlimit=$?"; echo x > {work}/written; echo "write=$?"; kill -TERM "$VICTIM"; echo "kill=$?"; '
               f"python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>/dev/null; echo \"unix=$?\"")
    results = {}
    for label, inner in (("sandboxed", sandbox.launcher_line(command, 20)),
                         ("plain", f"exec bash --noprofile --norc -c {shlex.quote(command)}")):
        script = (f"sleep 60 >/dev/null 2>&1 & export VICTIM=$!\n( {inner} ) </dev/null 2>/dev/null\n"
                  "sleep 0.1; kill -0 $VICTIM 2>/dev/null && echo alive; kill -KILL $VICTIM 2>/dev/null")
        r = host.run(as_nobody + shlex.quote(script), timeout=40)
        results[label] = r.stdout.split()
    shutil.rmtree(work)
    assert results["plain"] == ["renice=0", "prlimit=0", "write=0", "kill=0", "unix=0"], results
    sandboxed = results["sandboxed"]
    # no unix socket either: a daemon may trust this user (docker's group)
    assert sandboxed == ["renice=1", "prlimit=1", "write=1", "kill=1", "unix=1", "alive"], results


def test_a_user_who_is_not_root_reaches_only_loopback():
    """As nobody, with a port named: the Landlock mode's own network namespace (unprivileged user namespaces
    are allowed here) relays that port of 127.0.0.1, and the same port on another address stays out of
    reach, as it is not with Landlock's port rules alone."""
    address = _non_loopback_address()
    assert address, "this machine has no non-loopback IPv4 address to test with"
    loop_port, other_port = free_ports(2)
    host = LocalHost(HostSpec(name="l", transport="local"))
    info = probe_host(LocalHost(HostSpec(name="n", transport="local")))
    sandbox = SandboxedHost(host, dataclasses.replace(info, mechanism="landlock"), ports=[loop_port, other_port])
    ready = Path(tempfile.mkdtemp(prefix="sandbox-nobody-"))
    ready.chmod(0o777)
    listen = (f"{shlex.quote(info.python)} -c {shlex.quote(LISTENER)} {ready}/ready 127.0.0.1:{loop_port} "
              f"{address}:{other_port} >/dev/null 2>&1 & L=$!\n"
              f"for i in $(seq 200); do [ -s {ready}/ready ] && break; sleep 0.01; done")
    command = f"{tcp_reach('127.0.0.1', loop_port)}; {tcp_reach(address, other_port)}"
    as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all bash --noprofile --norc -c "
    seen = {}
    for label, inner in (("sandboxed", sandbox.launcher_line(command, 20)),
                         ("plain", f"exec bash --noprofile --norc -c {shlex.quote(command)}")):
        script = f"rm -f {ready}/ready\n{listen}\n( {inner} ) </dev/null 2>/dev/null\nkill $L"
        seen[label] = host.run(as_nobody + shlex.quote(script), timeout=40).stdout.split()
    shutil.rmtree(ready)
    assert seen["plain"] == [f"got:ok:{loop_port}", f"got:ok:{other_port}"], seen
    assert seen["sandboxed"] == [f"got:ok:{loop_port}", "no-connection"], seen


# ---- what a read may not spend, and what it may use ----------------------------------------------------------

@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_can_reopen_its_own_output_by_path(target):
    # `> /dev/stderr` and `tee /dev/stdout` reopen the command's pipes through /proc/self/fd: the pipes are
    # the reader's own, or the kernel refuses the reader (the root that made them owns them)
    r = target.sandboxed().run("echo out > /dev/stdout; echo err > /dev/stderr; echo both | tee /dev/stderr",
                               timeout=20)
    assert (r.exit_code, r.stdout, r.stderr) == (0, "out\nboth\n", "err\nboth\n"), r


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_a_read_dumps_no_core_and_is_first_in_the_oom_killers_line(target):
    # a core file would be written by the kernel's core handler, as root and outside every namespace
    r = target.sandboxed().run("ulimit -c; cat /proc/self/oom_score_adj", timeout=20)
    assert r.stdout.split() == ["0", "1000"], r
    assert target.host.run("ulimit -c; cat /proc/self/oom_score_adj", timeout=20).stdout.split() != ["0", "1000"]


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_an_ipc_object_a_read_makes_does_not_outlive_it(target):
    # namespaces: each read has an IPC namespace of its own; Landlock: the calls that make one are refused
    sh = target.sandboxed()
    made = sh.run("ipcmk -M 4096 && ipcs -m | grep -c 4096", timeout=20)
    if target.mechanism == "landlock":
        assert made.exit_code != 0 and "not permitted" in made.stderr, made
    else:
        assert made.exit_code == 0 and made.stdout.split()[-1] == "1", made
        assert sh.run("ipcs -m | grep -c 4096 || true", timeout=20).stdout.strip() == "0"


@pytest.mark.parametrize("target", params_for("local", "ssh"), indirect=True)
def test_an_abstract_unix_socket_of_the_host_is_not_reachable(target):
    # abstract sockets need no file: any uid that shares the network namespace may connect, unless Landlock's
    # scope (ABI 6) keeps the read to its own
    name = f"upgrade-agent-test-{uuid.uuid4().hex[:8]}"
    listen = (f"{shlex.quote(target.info.python)} -c \"import socket,time; s=socket.socket(socket.AF_UNIX); "
              f"s.bind(b'\\\\0{name}'); s.listen(1); time.sleep(20)\" & L=$!; sleep 0.3")
    connect = (f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect(b'\\\\0{name}'); "
               f"print('connected')\"")
    out, _, _ = around(target, target.sandboxed(), connect, before=listen, after="kill $L")
    assert "connected" not in out, out
    out, _, _ = around(target, None, connect, before=listen, after="kill $L")
    assert "connected" in out, out


@pytest.mark.parametrize("target", ALL, indirect=True)
def test_the_scratch_holds_a_bounded_number_of_files(target):
    # the size bound does not count inodes, which cost the kernel memory too (namespace mode: a tmpfs of the
    # read's own; Landlock's scratch is a directory of the host's TMPDIR, bounded by that file system)
    r = target.sandboxed().run('cd "$TMPDIR" && for i in $(seq 20000); do : > "f$i" || break; done; ls | wc -l',
                               timeout=60)
    count = int(r.stdout.split()[-1])
    if target.mechanism == "namespaces":
        assert count < 20000 and "No space left" in r.stderr, (count, r.stderr[-200:])
    else:
        assert count == 20000
