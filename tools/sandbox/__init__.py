"""The read sandbox: every command the gate runs without approval runs inside it, on its own host.

The classifier predicts from a command's text that it only reads; the kernel makes it so. On every
transport (local, SSH, sim) the command line is wrapped so that the host's own python3 runs
`launcher.py` (shipped with the command, as Ansible ships its modules): it builds the sandbox with what
that host has (namespaces as root, Landlock otherwise, seccomp on both), then runs the command in it.
A miss of the classifier then costs a failed read, not a changed host.

    hosts = SandboxedHosts(pool)           # what a read's ToolContext gets instead of the pool
    hosts.get("gpu1").run("cat /etc/os-release")

The mechanism is probed once per host, on first use, and reported through the pool's `on_event`
("read_sandbox"), so the transcript says what guarded the reads. A host where nothing can be set up
refuses reads in the sandbox with a message that says so; the operator's opt-out (`unsandboxed`) lets
them run as before, and that too is recorded.
"""

from tools.sandbox.host import (
    SANDBOX_STATUS,
    ReadSandboxUnavailable,
    SandboxedHost,
    SandboxedHosts,
    SandboxInfo,
    loopback_ports,
    outside_the_sandbox,
    probe_host,
    sandbox_refusal,
)

__all__ = ["SANDBOX_STATUS", "ReadSandboxUnavailable", "SandboxInfo", "SandboxedHost", "SandboxedHosts",
           "loopback_ports", "outside_the_sandbox", "probe_host", "sandbox_refusal"]
