"""Hosts: one interface, three transports (local subprocess, SSH through paramiko, a sim in a sandbox).

Every command runs as `bash --noprofile --norc -c COMMAND` with PATH set explicitly, so
aliases and profile scripts cannot change what runs. stdout and stderr are drained
together while the command runs and streamed to an optional listener. A wall-clock
timeout kills the whole process group, not just our end of the pipe.

The modules, each with one job (none of them imports this package, so there is no cycle):

- base.py: what every transport shares: the errors, HostSpec, SSHSettings, CommandResult,
  the command helpers (wrap_command, command_subject, ...) and the Host interface
- local.py: LocalHost, commands on this machine through subprocess
- sim.py: SimHost, a simulated GPU host's commands in a bubblewrap sandbox at real paths
- pool.py: HostPool, the hosts of a session, opened on first use
- ssh.py: SSHHost, the SSH transport (connections, jump hosts, host keys), with
  ssh_config.py (where a host is: ~/.ssh/config and targets), ssh_auth.py (key
  authentication) and ssh_run.py (one command on a channel: output, timeout, kill)

paramiko is imported only when a session has an SSH host: this package re-exports the names
callers use without it (SSHSettings and the host-key errors among them), not the SSH modules.
"""

from __future__ import annotations

from tools.hosts.base import (
    DEFAULT_PATH,
    ChangedHostKeyError,
    CommandResult,
    CommandText,
    EnvVars,
    Host,
    HostError,
    HostSpec,
    OutputListener,
    SSHSettings,
    UnknownHostKeyError,
    acquire_slot,
    check_env_names,
    command_subject,
    sudo_hint,
    user_data_dir,
    wrap_command,
)
from tools.hosts.local import LocalHost
from tools.hosts.pool import HostPool
from tools.hosts.sim import SandboxUnavailable, SimHost

__all__ = [
    "DEFAULT_PATH",
    "ChangedHostKeyError",
    "CommandResult",
    "CommandText",
    "EnvVars",
    "Host",
    "HostError",
    "HostPool",
    "HostSpec",
    "LocalHost",
    "OutputListener",
    "SandboxUnavailable",
    "SimHost",
    "SSHSettings",
    "UnknownHostKeyError",
    "acquire_slot",
    "check_env_names",
    "command_subject",
    "sudo_hint",
    "user_data_dir",
    "wrap_command",
]
