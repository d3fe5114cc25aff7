"""Typed tools the agent acts through, and the host layer they share."""

from __future__ import annotations

import importlib

# Tool modules in the order the model sees them. Each defines one Tool subclass named in TOOLS.
TOOLS = {
    "inspect_host": "tools.inspect_host:InspectHost",
    "check_compat": "tools.check_compat:CheckCompat",
    "ssh_exec": "tools.ssh_exec:SSHExec",
    "web_search": "tools.web_search:WebSearch",
    "pip_freeze_backup": "tools.pip_freeze_backup:PipFreezeBackup",
    "pip_install": "tools.pip_install:PipInstall",
    "restore_backup": "tools.restore_backup:RestoreBackup",
    "install_runfile": "tools.install_runfile:InstallRunfile",
    "run_bench": "tools.run_bench:RunBench",
    "check_outputs": "tools.check_outputs:CheckOutputs",
    "drain_node": "tools.drain_node:DrainNode",
    "undrain_node": "tools.drain_node:UndrainNode",
}


def default_tools(names: list[str] | None = None) -> list:
    """Instances of the project's tools, in the order the model sees them."""
    out = []
    for name, ref in TOOLS.items():
        if names is None or name in names:
            module, cls = ref.split(":")
            out.append(getattr(importlib.import_module(module), cls)())
    return out
