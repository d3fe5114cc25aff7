"""Hosts as sessions name them: a goal file's or a flag's entry turned into a HostSpec.

Kept apart from the session builder so `agent exec` resolves its one host without loading the
model client, the loop or the sim.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.errors import SessionConfigError
from agent.goal import HostEntry, SimMachine, host_entry_for
from tools.hosts import HostSpec, SandboxUnavailable
from tools.hosts.sim import check_sandbox, is_sim_root


def host_spec(entry: HostEntry, sim_dir: Path | None = None, sim: Any = None) -> tuple[HostSpec, Any]:
    """A goal file's host entry as a HostSpec; a `sim` entry builds a fresh simulated GPU host
    (or uses the one given)."""
    if entry.transport == "sim":
        if sim is None:
            root = (sim_dir or Path(tempfile.mkdtemp(prefix="upgrade-agent-sim-"))) / entry.name
            from tools.sim import Sim, SimBuildError, build_sim  # lazy: only a sim host loads the sim's builder

            try:
                check_sandbox()
                if is_sim_root(root):
                    # The same host in another part of a rollout (`agent fleet --resume`): as it was left.
                    sim = Sim.open(root)
                else:
                    machine = entry.sim or SimMachine()
                    sim = build_sim(root, **machine.build_options())
                    if machine.numerics != "stable":
                        sim.set_numerics(machine.numerics)
                    if machine.slurm is not None or machine.kubernetes is not None:
                        sim.join_scheduler(entry.name, slurm=machine.slurm and machine.slurm.model_dump(),
                                           kubernetes=machine.kubernetes and machine.kubernetes.model_dump())
            except (SimBuildError, SandboxUnavailable) as e:
                raise SessionConfigError(f"host {entry.name}: {e}") from None
        spec = sim.host_spec(name=entry.name)
        spec.read_sandbox = entry.read_sandbox
        return spec, sim
    spec = HostSpec(name=entry.name, transport=entry.transport, target=entry.target,
                    path_prefix=list(entry.path_prefix), env=dict(entry.env), python=entry.python,
                    max_sessions=entry.max_sessions, trust_host_key=entry.trust_host_key,
                    identity_file=entry.identity_file, read_sandbox=entry.read_sandbox)
    return spec, None


def host_entry_from_flag(value: str, trusted: list[str]) -> HostEntry:
    """`--host` values: 'local', 'sim', or an ssh target / alias (as in goal files)."""
    try:
        return host_entry_for(value, trusted[0] if trusted else None)
    except ValidationError as e:
        raise SessionConfigError(f"--host: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def describe_host(spec: HostSpec, sim: Any = None) -> str:
    """One line about a host for the system prompt: its name, and what is particular about it."""
    if sim is not None:
        return (f"{spec.name} (a simulated GPU host; it has no internet access, so NVIDIA's CUDA archive is "
                f"mirrored at /srv/nvidia/compute/cuda/<release>/, a release being the whole version such as 13.0.1 (local_installers/ and docs/sidebar/md5sum.txt, as "
                f"on developer.download.nvidia.com) and PyTorch's wheel indexes at {sim.index_urls['cu128']} and "
                f"{sim.index_urls['cu130']}; its venv's python, {spec.python}, is first on PATH; its serving "
                f"benchmarks bring their server up inside the benchmark process, and report simulated GPU time)")
    return f"{spec.name} ({spec.transport}{', ' + spec.target if spec.target else ''})"
