"""What the SSH host layer costs per command, against OpenSSH's own client.

Starts a throwaway sshd on 127.0.0.1 (the one the tests use, from tests/sshd.py) and measures:

1. N sequential `true` commands
   - through ssh_exec on the pooled connection (the way the agent runs commands),
   - through OpenSSH's client multiplexed over a ControlMaster socket, sending the exact
     remote command line ssh_exec sends (same work on the server, so the ratio is the
     clients' own cost), and sending a bare `true` (less work on the server),
   - through a fresh paramiko connection per command (connect, auth, run, close).
2. 8 concurrent `sleep 1` on one host through ssh_exec: the wall time.

    python benchmarks/ssh_overhead.py            # a table
    python benchmarks/ssh_overhead.py --json     # one JSON object

Targets: pooled <= 0.5x the multiplexed OpenSSH client, >= 20x faster than reconnecting,
8 x `sleep 1` within 1.15 s.

The clients take turns in rounds (each round runs a slice of every client's commands) and
each figure is the median over the rounds, scaled to N commands: on a small shared machine
a burst of other work then slows every client alike instead of the one that ran during it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The sshd starter is test infrastructure; it stays in tests/ and is loaded from there by path
# rather than shipped inside the `tools` package.
sys.path.insert(0, str(ROOT / "tests"))

import paramiko  # noqa: E402

from tools.base import ArtifactStore, ToolContext  # noqa: E402
from tools.hosts import HostPool, HostSpec, SSHSettings  # noqa: E402
from tools.ssh_exec import SSHExec  # noqa: E402

from sshd import SSHD, keygen  # noqa: E402


def _timed(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - start


def _median(values: list[float]) -> float:
    return statistics.median(values)


class Bench:
    def __init__(self, workdir: Path, n: int, reconnect_n: int):
        self.n, self.reconnect_n = n, reconnect_n
        self.key = keygen(workdir / "client_key")
        self.sshd = SSHD(workdir / "sshd", authorized_keys=[self.key]).start()
        self.known_hosts = workdir / "known_hosts"
        self.known_hosts.write_text(self.sshd.known_hosts_line())
        self.config = workdir / "ssh_config"
        self.config.write_text(
            f"Host box\n  HostName 127.0.0.1\n  Port {self.sshd.port}\n  User {self.sshd.user}\n"
            f"  IdentityFile {self.key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n"
            f"  StrictHostKeyChecking yes\n  BatchMode yes\n"
        )
        self.settings = SSHSettings(config_path=self.config, known_hosts_paths=[self.known_hosts],
                                    project_known_hosts=workdir / "project_known_hosts")
        self.control_path = workdir / "cm.sock"

    def close(self):
        subprocess.run(self._ssh("-O", "exit", "box"), capture_output=True)
        if getattr(self, "pool", None) is not None:
            self.pool.close()
        self.sshd.stop()

    # -- the clients: each returns a function that runs one `true`, after any warm-up

    def pooled_client(self):
        self.pool = HostPool([HostSpec(name="box")], settings=self.settings)
        tool = SSHExec()
        self.ctx = ToolContext(hosts=self.pool, artifacts=ArtifactStore(None))
        args = tool.parse_args({"host": "box", "command": "true"})

        def one():
            r = tool.run(self.ctx, args)
            assert r.exit_code == 0, r

        one()  # opens the connection; the pooled figure is about the commands after it
        return one

    def concurrent_sleep(self) -> float:
        tool = SSHExec()
        args = tool.parse_args({"host": "box", "command": "sleep 1"})
        barrier = threading.Barrier(8)

        def one(_):
            barrier.wait()
            r = tool.run(self.ctx, args)
            assert r.exit_code == 0, r

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            start = time.perf_counter()
            list(ex.map(one, range(8)))
            return time.perf_counter() - start

    def _ssh(self, *args: str) -> list[str]:
        return ["ssh", "-F", str(self.config), "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path}",
                "-o", "ControlPersist=120", *args]

    def openssh_mux_client(self, remote: str):
        cmd = self._ssh("box", remote)

        def one():
            subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        one()  # starts the master
        return one

    def reconnect_client(self):
        def one():
            pool = HostPool([HostSpec(name="box")], settings=self.settings)
            try:
                assert pool.get("box").run("true").exit_code == 0
            finally:
                pool.close()

        return one

    def bare_channel_client(self):
        """The floor: a raw paramiko channel on the pooled connection running a bare `true`
        (no clean-environment wrapper, no output handling); what any one-channel-per-command
        client pays for the channel and sshd's session start."""
        transport = self.pool.get("box").transport

        def one():
            chan = transport.open_session()
            chan.exec_command("true")
            chan.shutdown_write()
            assert chan.recv_exit_status() == 0
            chan.close()

        return one

    def remote_line(self) -> str:
        return self.pool.get("box").remote_command_line("true")


def measure(n: int, reconnect_n: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ssh-bench-") as tmp:
        bench = Bench(Path(tmp), n, reconnect_n)
        try:
            pooled_one = bench.pooled_client()
            clients = {
                "pooled": (pooled_one, n),
                "mux_same": (bench.openssh_mux_client(bench.remote_line()), n),
                "mux_bare": (bench.openssh_mux_client("true"), n),
                "reconnect": (bench.reconnect_client(), reconnect_n),
                "bare_channel": (bench.bare_channel_client(), n),
            }
            per_command: dict[str, list[float]] = {name: [] for name in clients}
            for _ in range(rounds):
                for name, (one, count) in clients.items():
                    slice_n = max(1, count // rounds)
                    per_command[name].append(_timed(one, slice_n) / slice_n)
            sleeps = [bench.concurrent_sleep() for _ in range(3)]
        finally:
            bench.close()
    pooled = _median(per_command["pooled"]) * n
    mux_same = _median(per_command["mux_same"]) * n
    mux_bare = _median(per_command["mux_bare"]) * n
    reconnect = _median(per_command["reconnect"]) * n
    bare_channel = _median(per_command["bare_channel"]) * n
    sleep_wall = _median(sleeps)
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "paramiko": paramiko.__version__,
            "openssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
            "platform": platform.platform(),
            "sshd_user": "root" if os.geteuid() == 0 else "unprivileged",
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "sequential_true": {
            "commands": n,
            "pooled_s": round(pooled, 3),
            "openssh_mux_same_line_s": round(mux_same, 3),
            "openssh_mux_bare_true_s": round(mux_bare, 3),
            "reconnect_each_s": round(reconnect, 3),
            "paramiko_bare_channel_s": round(bare_channel, 3),
            "reconnect_measured_commands": reconnect_n,
            "rounds": rounds,
            "pooled_ms_per_command": round(pooled / n * 1000, 2),
            "pooled_vs_openssh_mux_same_line": round(pooled / mux_same, 3),
            "pooled_vs_openssh_mux_bare_true": round(pooled / mux_bare, 3),
            "reconnect_vs_pooled": round(reconnect / pooled, 1),
            "reconnect_vs_bare_channel": round(reconnect / bare_channel, 1),
        },
        "concurrent_sleep_1": {"commands": 8, "wall_s": round(sleep_wall, 3),
                               "wall_s_each_try": [round(x, 3) for x in sleeps]},
        "targets": {
            "pooled_at_most_0.5x_openssh_mux": pooled / mux_same <= 0.5,
            "pooled_at_least_20x_faster_than_reconnect": reconnect / pooled >= 20,
            "eight_sleeps_within_1.15s": sleep_wall <= 1.15,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("-n", type=int, default=200, help="sequential commands per client (default 200)")
    parser.add_argument("--reconnect-n", type=int, default=100,
                        help="commands measured for reconnect-per-command, scaled to n (default 100)")
    parser.add_argument("--rounds", type=int, default=10, help="turns the clients take (default 10)")
    opts = parser.parse_args()
    figures = measure(opts.n, min(opts.reconnect_n, opts.n), opts.rounds)
    if opts.json:
        print(json.dumps(figures))
        return
    s, c = figures["sequential_true"], figures["concurrent_sleep_1"]
    print(f"{s['commands']} sequential `true` ({figures['machine']['cpus']} CPUs, {figures['machine']['openssh']})")
    print(f"  ssh_exec, pooled connection        {s['pooled_s']:8.3f} s  ({s['pooled_ms_per_command']} ms each)")
    print(f"  OpenSSH ControlMaster, same line   {s['openssh_mux_same_line_s']:8.3f} s  "
          f"pooled/mux = {s['pooled_vs_openssh_mux_same_line']}x (target <= 0.5x)")
    print(f"  OpenSSH ControlMaster, bare true   {s['openssh_mux_bare_true_s']:8.3f} s  "
          f"pooled/mux = {s['pooled_vs_openssh_mux_bare_true']}x")
    print(f"  paramiko, new connection each      {s['reconnect_each_s']:8.3f} s  "
          f"reconnect/pooled = {s['reconnect_vs_pooled']}x (target >= 20x)")
    print(f"  paramiko bare channel, bare true   {s['paramiko_bare_channel_s']:8.3f} s  "
          f"reconnect/bare = {s['reconnect_vs_bare_channel']}x (the floor of one channel per command)")
    print(f"8 concurrent `sleep 1`: {c['wall_s']:.3f} s wall, median of {c['wall_s_each_try']} (target <= 1.15 s)")
    for name, met in figures["targets"].items():
        print(f"  {'met   ' if met else 'MISSED'} {name}")


if __name__ == "__main__":
    main()
