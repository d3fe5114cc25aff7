"""An Ansible connection to upgrade-agent's simulated GPU hosts: each command in the sim's sandbox.

    ANSIBLE_CONNECTION_PLUGINS=<this folder> ansible-playbook -i sims.ini playbook.yml
    # sims.ini:  gpu01 ansible_connection=upgrade_agent_sim agent_sim_root=/path/to/sim

So a playbook that `agent recipe --ansible` exported runs on the same simulated machines `agent fleet`
runs on, through the same bubblewrap sandbox (tools/hosts/sim.py): the machine's OS read-only, the
sim's trees at their real paths, no network. Files move through the sandbox too, so nothing a task
writes lands outside the sim.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.connection import ConnectionBase

from tools.hosts.sim import SandboxUnavailable, check_sandbox, sandbox_argv, serving_script
from tools.sim import Sim

DOCUMENTATION = """
    name: upgrade_agent_sim
    short_description: run tasks on an upgrade-agent simulated GPU host
    description:
      - Runs each command inside the bubblewrap sandbox of a sim built by upgrade-agent.
    author: upgrade-agent
    options:
      sim_root:
        description: the sim's root folder (it holds .sim/state.json)
        vars:
          - name: agent_sim_root
        required: true
"""


class Connection(ConnectionBase):
    transport = "upgrade_agent_sim"
    has_pipelining = True

    def _connect(self):
        if not self._connected:

            root = Path(self.get_option("sim_root"))
            if not (root / ".sim" / "state.json").is_file():
                raise AnsibleConnectionFailure(f"{root} is not a simulated GPU host (no .sim/state.json)")
            try:
                check_sandbox()
            except SandboxUnavailable as e:  # its message says what to install
                raise AnsibleConnectionFailure(str(e)) from None
            self._root = root
            # The environment a command on the sim gets from the sim transport: its venv first on PATH, as on a
            # box whose engineers activate it, and nothing of this machine's own environment.
            spec = Sim.open(root).host_spec(self._play_context.remote_addr or "sim")
            self._env = {"PATH": spec.path(), "HOME": "/root", "LANG": "C.UTF-8", **spec.env}
            self._connected = True
        return self

    def _argv(self, command: str, in_data: bytes | None = None) -> list[str]:
        # A module that asks the served port (its arguments travel on stdin with pipelining) finds the sim's server
        # up, as a task over the sim transport does.
        asked = command + (in_data or b"").decode("utf-8", "replace")
        script = serving_script(self._root, f"exec /bin/sh -c {shlex.quote(command)}", asked)
        return [*sandbox_argv(self._root, self._play_context.remote_addr or "sim"), "bash", "--noprofile", "--norc",
                "-c", script]

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        p = subprocess.run(self._argv(cmd, in_data), input=in_data, capture_output=True, env=self._env, check=False)
        return p.returncode, p.stdout, p.stderr

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        self._connect()
        with open(in_path, "rb") as f:
            data = f.read()
        rc, _, err = self.exec_command(f"cat > {shlex.quote(out_path)}", in_data=data)
        if rc != 0:
            raise AnsibleError(f"could not write {out_path} on the sim: {err.decode(errors='replace').strip()}")

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        self._connect()
        rc, data, err = self.exec_command(f"cat -- {shlex.quote(in_path)}")
        if rc != 0:
            raise AnsibleError(f"could not read {in_path} on the sim: {err.decode(errors='replace').strip()}")
        with open(out_path, "wb") as f:
            f.write(data)

    def close(self):
        self._connected = False
