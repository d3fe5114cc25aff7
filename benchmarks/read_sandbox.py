"""What the read sandbox costs a read: pooled ssh_exec and inspect_host, with and without it.

    python3 benchmarks/read_sandbox.py [--n 60] [--rounds 3]

A real OpenSSH server on 127.0.0.1 (tests/sshd.py) and one pooled connection; the same read
(`cat /etc/os-release`) through the ssh_exec tool, with the session's hosts as they are ("plain"),
wrapped in the read sandbox as it runs ("sandboxed": the host's sandbox server), and wrapped with a
launcher started for each read ("launcher_per_read", the way before the server), alternating round by
round so that the machine's load falls on all alike; then inspect_host the same way. Prints one JSON
object: medians per command and the ratios to plain (targets: ssh_exec <= 2x, inspect_host <= 1.2x).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tools.base import ArtifactStore, ToolContext  # noqa: E402
from tools.hosts import HostPool, HostSpec, SSHSettings  # noqa: E402
from tools.inspect_host import InspectHost  # noqa: E402
import tools.sandbox.host as sandbox_host  # noqa: E402
from tools.sandbox import SandboxedHosts  # noqa: E402
from tools.ssh_exec import SSHExec  # noqa: E402

from sshd import SSHD, keygen  # noqa: E402


def per_call(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="ssh_exec reads per round and variant")
    parser.add_argument("--inspect-n", type=int, default=3, help="inspect_host calls per round and variant")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        work = Path(tmp)
        key = keygen(work / "client_key")
        sshd = SSHD(work / "sshd", authorized_keys=[key]).start()
        try:
            known = work / "known_hosts"
            known.write_text(sshd.known_hosts_line())
            config = work / "ssh_config"
            config.write_text(f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                              f"  IdentityFile {key}\n  IdentitiesOnly yes\n")
            settings = SSHSettings(config_path=config, known_hosts_paths=[known],
                                   project_known_hosts=work / "project_known_hosts")
            events: list = []
            pool = HostPool([HostSpec(name="box")], settings=settings, on_event=lambda k, d: events.append((k, d)))
            variants = {"plain": pool, "sandboxed": SandboxedHosts(pool), "launcher_per_read": SandboxedHosts(pool)}
            ssh_exec, inspect = SSHExec(), InspectHost()
            read = ssh_exec.parse_args({"host": "box", "command": "cat /etc/os-release"})
            look = inspect.parse_args({"host": "box"})
            times = {f"{tool}_{v}": [] for tool in ("ssh_exec", "inspect_host") for v in variants}
            for name, hosts in variants.items():  # warm up: the connection, the probe, the server
                sandbox_host.SERVER_ENABLED = name != "launcher_per_read"
                ctx = ToolContext(hosts=hosts, artifacts=ArtifactStore(None))
                assert ssh_exec.run(ctx, read).exit_code == 0
            for _ in range(opts.rounds):
                for name, hosts in variants.items():
                    sandbox_host.SERVER_ENABLED = name != "launcher_per_read"
                    ctx = ToolContext(hosts=hosts, artifacts=ArtifactStore(None))

                    def one_read():
                        r = ssh_exec.run(ctx, read)
                        assert r.exit_code == 0, r

                    times[f"ssh_exec_{name}"].append(per_call(one_read, opts.n))
                    times[f"inspect_host_{name}"].append(per_call(lambda: inspect.run(ctx, look), opts.inspect_n))
            pool.close()
        finally:
            sshd.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "ssh_exec_ms": {v: round(med[f"ssh_exec_{v}"] * 1000, 2) for v in variants},
        "inspect_host_ms": {v: round(med[f"inspect_host_{v}"] * 1000, 1) for v in variants},
        "ssh_exec_ratio": {v: round(med[f"ssh_exec_{v}"] / med["ssh_exec_plain"], 2) for v in variants if v != "plain"},
        "inspect_host_ratio": {v: round(med[f"inspect_host_{v}"] / med["inspect_host_plain"], 2)
                               for v in variants if v != "plain"},
        "mechanism": next((d.get("mechanism") for k, d in events if k == "read_sandbox"), None),
        "rounds": opts.rounds, "n": opts.n, "inspect_n": opts.inspect_n,
        "all_rounds_ms": {k: [round(x * 1000, 2) for x in v] for k, v in times.items()},
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
