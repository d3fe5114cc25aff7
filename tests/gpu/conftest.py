"""GPU tests: the read-only tools on a real NVIDIA GPU machine.

    python3 -m pytest -m gpu tests/gpu        (docs/gpu.md: what they need and how to run them)

They are marked `gpu` and deselected by default (pyproject's addopts holds -m 'not gpu'); the run's
summary says how many were deselected. Selected on a machine without nvidia-smi, each fails at
once with what to do instead of skipping: a GPU run that quietly tested nothing would read as a pass.

What they compare is what the tools report against what nvidia-smi, nvcc and torch say directly.
Figures (throughput) are printed, never asserted.
"""

from __future__ import annotations

import shutil

import pytest

from tools.hosts import HostPool, HostSpec

import sshd as sshd_module
from gpu_support import (
    NO_GPU,
    Readings,
    gpu_python,
    host_path_prefix,
    local_spec,
    read_machine,
    ssh_settings,
    sshd_binary,
)

# --------------------------------------------------------------------------- selection

_deselected_gpu_tests = 0


def pytest_deselected(items):
    global _deselected_gpu_tests
    _deselected_gpu_tests += sum(1 for item in items if item.get_closest_marker("gpu"))


def pytest_terminal_summary(terminalreporter, config):
    if _deselected_gpu_tests:
        how = " (-m 'not gpu')" if "not gpu" in (config.option.markexpr or "") else ""
        terminalreporter.write_line(
            f"{_deselected_gpu_tests} GPU tests deselected{how}: they need an NVIDIA GPU; "
            f"run them with `python3 -m pytest -m gpu tests/gpu` on one (docs/gpu.md)")


@pytest.fixture(autouse=True)
def _needs_an_nvidia_gpu(request):
    if request.node.get_closest_marker("gpu") and shutil.which("nvidia-smi") is None:
        pytest.fail(NO_GPU, pytrace=False)


# --------------------------------------------------------------------------- the machine and its hosts


@pytest.fixture(scope="session")
def readings() -> Readings:
    if shutil.which("nvidia-smi") is None:
        pytest.fail(NO_GPU, pytrace=False)
    return read_machine()


@pytest.fixture
def local_pool():
    pool = HostPool([local_spec("gpu")])
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def gpu_sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 with throwaway keys; (server, client key)."""
    binary = sshd_binary(sshd_module.SSHD_BINARY)
    if binary is None or shutil.which("ssh-keygen") is None:
        pytest.fail("the SSH half of the GPU tests needs OpenSSH's sshd (set UPGRADE_AGENT_SSHD to its path if it "
                    "is not /usr/sbin/sshd) and ssh-keygen on PATH; docs/gpu.md shows how to bring them",
                    pytrace=False)
    sshd_module.SSHD_BINARY = binary  # SSHD.start runs the binary this module names
    root = tmp_path_factory.mktemp("gpu-ssh")
    key = sshd_module.keygen(root / "client" / "id_ed25519")
    server = sshd_module.SSHD(root / "sshd", authorized_keys=[key]).start()
    yield server, key
    server.stop()


@pytest.fixture
def ssh_pool(gpu_sshd, tmp_path):
    server, key = gpu_sshd
    spec = HostSpec(name="gpu-ssh", transport="ssh", target="gpu-ssh", python=gpu_python(),
                    path_prefix=host_path_prefix())
    pool = HostPool([spec], settings=ssh_settings(tmp_path / "client", "gpu-ssh", server, key))
    yield pool
    pool.close()
