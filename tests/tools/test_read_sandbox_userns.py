"""The read sandbox as root of a user namespace that maps no uid but its own (a rootless container,
`unshare -r`): the reader uid does not exist there. Every read failed with EINVAL (the pipes were given to
that uid); now the command keeps root's uid with no capability, and the kernel still refuses what a read
must not do. Each refusal is checked beside the same command run without the sandbox, which succeeds."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.sandbox.launcher import READER_PROCESSES  # the bound on a read's processes

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, subprocess, sys
from tools.hosts import HostSpec, LocalHost
from tools.sandbox import SandboxedHost, probe_host
import dataclasses

work = sys.argv[1]
host = LocalHost(HostSpec(name="l", transport="local"))
info = probe_host(host)
sleeper = subprocess.Popen(["sleep", "60"])
out = {"mechanism": info.mechanism, "uid_map": open("/proc/self/uid_map").read().split()}
commands = {
    "read": f"cat {work}/readme.txt",
    "write": f"echo changed > {work}/readme.txt && cat {work}/readme.txt",
    "create": f"touch {work}/new && ls {work}/new",
    "signal": f"kill -STOP {sleeper.pid} && kill -CONT {sleeper.pid}",
    "stderr": "echo to-stderr > /dev/stderr",
}
for mechanism in ("namespaces", "landlock"):
    sandboxed = SandboxedHost(host, dataclasses.replace(info, mechanism=mechanism))
    for name, command in commands.items():
        r = sandboxed.run(command, timeout=20)
        out[f"{mechanism}:{name}"] = [r.exit_code, r.stdout.strip(), r.stderr.strip()[-200:]]
    out[f"{mechanism}:unchanged"] = open(f"{work}/readme.txt").read()
for name in ("write", "signal"):
    r = host.run(commands[name], timeout=20)
    out[f"outside:{name}"] = [r.exit_code, r.stdout.strip()]
sleeper.kill()
print(json.dumps(out))
'''


def _user_namespaces_allowed() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _user_namespaces_allowed(), reason="this machine allows no user namespace (unshare -rm)")
def test_root_of_a_user_namespace_reads_and_is_refused_what_a_read_must_not_do(tmp_path):
    (tmp_path / "readme.txt").write_text("hello\n")
    r = subprocess.run(["unshare", "-rm", sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["uid_map"][1] != "0" or out["uid_map"][2] == "1"  # one uid mapped: no reader uid in there
    for mechanism in ("namespaces", "landlock"):
        assert out[f"{mechanism}:read"][:2] == [0, "hello"], out
        assert out[f"{mechanism}:stderr"][0] == 0 and "to-stderr" in out[f"{mechanism}:stderr"][2], out
        assert out[f"{mechanism}:write"][0] != 0 and out[f"{mechanism}:unchanged"] == "hello\n", out
        assert out[f"{mechanism}:create"][0] != 0 and not (tmp_path / "new").exists(), out
        assert out[f"{mechanism}:signal"][0] != 0, out
    # without the sandbox, the same commands do what the sandbox refused (the write last: it changes the file)
    assert out["outside:signal"][0] == 0 and out["outside:write"] == [0, "changed"], out


# Processes until fork fails, or 2,200: more than the bound, fewer than would hurt this machine.
FORKS = ("import os, time\nn = 0\nwhile n < 2200:\n    try:\n        pid = os.fork()\n    except OSError:\n"
         "        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\nprint(n)")


@pytest.mark.skipif(not _user_namespaces_allowed() or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs user namespaces, and root to become another user (setpriv)")
@pytest.mark.parametrize("mechanism", ["namespaces", "landlock"])
def test_a_read_that_keeps_its_users_uid_has_its_processes_bounded(mechanism):
    """A user that is not root, in a user namespace that maps only its uid (a rootless container): the read
    keeps that uid, whose process count covers every process of the user on the machine, so no bound could
    be set on it (a fork bomb spent the host's pids). In a user namespace of its own the kernel (5.14+)
    counts the read's processes alone. The kernel bounds no process of uid 0, hence another user here."""
    from tools.hosts import HostSpec, LocalHost
    from tools.sandbox import SandboxInfo, SandboxedHost

    host = LocalHost(HostSpec(name="l", transport="local"))
    info = SandboxInfo(mechanism=mechanism, python="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                       else sys.executable)
    line = SandboxedHost(host, info).launcher_line("python3 -c " + shlex.quote(FORKS), 60)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "unshare", "-rm",
                        "bash", "-c", line], capture_output=True, text=True, timeout=120, cwd="/",
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert READER_PROCESSES - 10 <= int(r.stdout.split()[-1]) < READER_PROCESSES, (r.stdout, r.stderr[-2000:])
