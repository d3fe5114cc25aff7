"""Running an exported playbook with the real ansible-playbook on sandboxed sims (the upgrade_agent_sim
connection), for the tests and the benchmark: the sims as `agent fleet` builds them, an inventory that
reaches them, the environment ansible runs in, and its PLAY RECAP read back."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from agent.fleet.ansible import CONNECTION_PLUGINS
from agent.goal import HostEntry, SimMachine
from agent.host_specs import host_spec

ROOT = Path(__file__).resolve().parents[1]


def ansible_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH", "ANSIBLE_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "TMPDIR": str(home),
                "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS), "ANSIBLE_PIPELINING": "1",
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(home / "ansible-tmp"),
                "ANSIBLE_RETRY_FILES_ENABLED": "0"})
    return env


def sims_for_ansible(folder: Path, machines: dict[str, dict]) -> tuple[Path, dict[str, Path]]:
    """Sims built as `agent fleet` builds them, and an inventory that reaches them through the sim connection."""
    lines, roots = ["[gpu]"], {}
    for name, machine in machines.items():
        spec, _ = host_spec(HostEntry(name=name, transport="sim", sim=SimMachine(**machine)), folder / "sims")
        roots[name] = Path(spec.sim_root)
        lines.append(f"{name} agent_sim_root={spec.sim_root} agent_python={spec.python}")
    lines += ["", "[gpu:vars]", "ansible_connection=upgrade_agent_sim", "ansible_python_interpreter=/usr/bin/python3"]
    inventory = folder / "sims.ini"
    inventory.write_text("\n".join(lines) + "\n")
    return inventory, roots


def ansible_playbook(inventory: Path, book: Path, home: Path, timeout: float = 900,
                     offline: bool = False, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    """`ansible-playbook -i INVENTORY BOOK [EXTRA...]`; with `offline`, in a network namespace of its own (a hostile
    recipe may name other hosts). Forks as the playbook's header asks."""
    argv = [sys.executable, "-m", "ansible", "playbook", "-i", str(inventory), "-f", "8", *(extra or []), str(book)]
    if offline:
        argv = ["unshare", "-rn", "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$@"', "sh", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=ansible_env(home), timeout=timeout, cwd=home,
                          check=False)


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's counters by host."""
    out = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", output, re.MULTILINE):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


# What differs between two engines' runs by nature, not by what they did: the backups' own folders (their ids and
# times; agent fleet's holds more files), compiled byte code (it holds its source's time; compared by name only),
# scratch space, the sim's logs, and the simulator's own byte code (its programs compiled as they are first used).
_OWN_RUN = re.compile(r"^(var/tmp/upgrade-agent/backups/|tmp/|var/tmp/(?!upgrade-agent)|var/log/|\.sim/lib/.*__pycache__)")


def tree(root: Path) -> dict[str, str]:
    """Every file and link of a sim, by its path: a file's sha256, a link's target, a directory's mode; what
    differs by nature between two runs (_OWN_RUN) left out, byte code by name only."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if _OWN_RUN.match(rel):
                continue
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir {path.stat().st_mode & 0o7777:o}"
            elif name.endswith(".pyc"):
                out[rel] = "byte code"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
