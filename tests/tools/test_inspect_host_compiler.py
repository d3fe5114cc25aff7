"""inspect_host reports the host compiler the CUDA runfile's installer needs (a played model missed it)."""

from __future__ import annotations

from tools.base import ArtifactStore, ToolContext
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.sim import build_sim


def _inspect(tmp_path, **sim_options):
    sim = build_sim(tmp_path / "sim", **sim_options)
    pool = HostPool([sim.host_spec()])
    try:
        tool = InspectHost()
        return tool.run(ToolContext(hosts=pool, artifacts=ArtifactStore(None)), tool.parse_args({"host": "sim"}))
    finally:
        pool.close()


def test_a_host_without_gcc_is_told_before_the_installer_refuses(tmp_path):
    result = _inspect(tmp_path, gcc=None)
    assert result.gcc is None
    assert any(n.startswith("no gcc on PATH: the CUDA runfile installer refuses") for n in result.notes)


def test_the_configured_compiler_is_reported(tmp_path):
    result = _inspect(tmp_path, gcc="gcc version 14.2.0 (Ubuntu 14.2.0-4ubuntu2~24.04) ")
    assert result.gcc is not None and "14.2.0" in result.gcc
    assert not any("gcc" in n for n in result.notes)
