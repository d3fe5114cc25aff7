"""The read-only tools on a real NVIDIA GPU, checked against nvidia-smi, nvcc and torch read directly.

inspect_host through the local transport and through SSH to a real sshd on 127.0.0.1;
pip_freeze_backup of the interpreter that holds torch (no restore); run_bench with
benchmarks/gpu_decode.py, two batch sizes compared. No figure is asserted: a benchmark's
values are printed, and only relations that follow from the tools' own rules are checked.
"""

from __future__ import annotations

import glob
import json
import math
import os
import platform
import re
import shutil
import statistics
from pathlib import Path

import pytest

from agent.safety.classifier import classify_workload
from tools.base import ArtifactStore, RiskClass, ToolContext
from tools.inspect_host import InspectHost
from tools.pip_freeze_backup import PipFreezeBackup
from tools.run_bench import RunBench, bench_subject

from gpu_support import REPO, gpu_python, run

pytestmark = pytest.mark.gpu


def ctx_for(pool, tmp_path: Path, store: dict | None = None) -> ToolContext:
    return ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"),
                       store=store if store is not None else {})


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


def mount_point(path: str) -> str:
    p = os.path.realpath(path)
    while not os.path.ismount(p):
        p = os.path.dirname(p)
    return p


# --------------------------------------------------------------------------- inspect_host


def check_against_readings(r, readings) -> None:
    q, smi, torch_facts = readings.query, readings.smi_q, readings.torch
    # The driver: nvidia-smi's query and its -q report, and the CUDA version it supports, also as the
    # driver API tells torch (cuDriverGetVersion).
    assert r.driver is not None, r.notes
    assert r.driver.version == q[0]["driver_version"] == smi["Driver Version"]
    assert r.driver.cuda_version == smi["CUDA Version"]
    if "driver_cuda" in torch_facts:
        assert r.driver.cuda_version == torch_facts["driver_cuda"]
    # The GPUs, one by one, against nvidia-smi's query and torch's view of the same devices.
    assert r.gpu_count == len(q) == torch_facts["device_count"]
    for gpu, row, name, cap in zip(r.gpus, q, torch_facts["names"], torch_facts["capabilities"]):
        assert (gpu.index, gpu.name, gpu.compute_capability, gpu.memory_total_mib) == \
               (int(row["index"]), row["name"], row["compute_cap"], int(row["memory.total"]))
        assert gpu.name == name and gpu.compute_capability == cap
    # The toolkit on the PATH the tools use, against `nvcc --version` of the same binary.
    if readings.nvcc is None:
        assert r.toolkit_on_path is None and "no nvcc on PATH" in r.notes
    else:
        release = re.search(r"release (\d+\.\d+), V(\S+)", readings.nvcc)
        assert r.toolkit_on_path is not None and r.toolkit_on_path.version == release.group(1)
        assert os.path.realpath(r.toolkit_on_path.path) == os.path.realpath(readings.nvcc_path)
        assert r.nvcc_build and r.nvcc_build in readings.nvcc
    # Every toolkit side by side, once: a directory with its own nvcc's release, and the cuda-* links
    # that resolve to it (Ubuntu's /usr/local/cuda-13 -> /etc/alternatives/cuda-13 -> /usr/local/cuda-13.0).
    entries = sorted(glob.glob("/usr/local/cuda-*"))
    listed = [t.path for t in r.toolkits] + [link for t in r.toolkits for link in (t.links or [])]
    assert sorted(listed) == [e for e in entries if os.path.isdir(e)]
    assert len({os.path.realpath(t.path) for t in r.toolkits}) == len(r.toolkits)
    for t in r.toolkits:
        nvcc = Path(t.path) / "bin" / "nvcc"
        direct = re.search(r"release (\d+\.\d+)", run([str(nvcc), "--version"])) if nvcc.exists() else None
        assert t.version == (direct.group(1) if direct else None)
        for link in t.links or []:
            assert os.path.islink(link) and os.path.realpath(link) == t.path
    cuda = "/usr/local/cuda"
    assert r.cuda_symlink == (os.path.realpath(cuda) if os.path.islink(cuda) else None)
    # torch of the interpreter of interest: as torch says, and as pip names the installed distribution.
    py = r.python
    assert py is not None and py.error is None, r.notes
    assert os.path.realpath(py.executable) == os.path.realpath(torch_facts["executable"])
    assert (py.torch, py.torch_cuda, py.cuda_available, py.device_count) == \
           (torch_facts["torch"], torch_facts["torch_cuda"], True, torch_facts["device_count"])
    assert py.packages.get("torch") == torch_facts["torch_dist"]
    pypi_build = "+" in py.torch and torch_facts["torch_dist"] == py.torch.partition("+")[0]
    assert pypi_build == any(n.startswith(f"torch reports {py.torch} but pip lists it") for n in r.notes)
    # OS and disk.
    assert r.kernel == f"{platform.system()} {platform.release()} {platform.machine()}"
    assert r.disk, r.notes
    for d in r.disk:
        assert d.mount == mount_point(d.path)
        st = os.statvfs(d.path)
        assert abs(d.total_gib - st.f_blocks * st.f_frsize / 2**30) <= 0.1
        assert 0 <= d.free_gib <= d.total_gib
    # The notes say what differs, and only that.
    toolkit = r.toolkit_on_path.version if r.toolkit_on_path else None
    differs = toolkit is not None and r.driver.cuda_version != toolkit
    assert differs == any("the driver supports CUDA" in n for n in r.notes)


def test_inspect_host_local_reads_what_the_machine_says(local_pool, readings, tmp_path):
    r = call(InspectHost(), ctx_for(local_pool, tmp_path), host="gpu")
    print(json.dumps(r.model_dump(mode="json"), indent=1))
    check_against_readings(r, readings)


def test_inspect_host_over_ssh_reads_the_same(local_pool, ssh_pool, readings, tmp_path):
    local = call(InspectHost(), ctx_for(local_pool, tmp_path), host="gpu").model_dump(mode="json")
    remote = call(InspectHost(), ctx_for(ssh_pool, tmp_path), host="gpu-ssh")
    check_against_readings(remote, readings)
    remote = remote.model_dump(mode="json")
    # Free space moves between the two calls; everything else is the same machine, read the same way.
    for side in (local, remote):
        side.pop("host")
        for d in side["disk"]:
            d.pop("free_gib"), d.pop("free_bytes")
    assert remote == local


# --------------------------------------------------------------------------- pip_freeze_backup


def test_pip_freeze_backup_of_the_torch_environment(local_pool, readings, tmp_path):
    r = call(PipFreezeBackup(), ctx_for(local_pool, tmp_path), host="gpu")
    try:
        print(json.dumps(r.model_dump(mode="json", exclude={"backup", "files"}), indent=1))
        assert r.verified and r.python == gpu_python()
        listed = json.loads(run([gpu_python(), "-m", "pip", "list", "--format=json"]))
        assert r.package_count == len(listed) > 0
        # pip's name for the installed torch: 2.11.0 for PyPI's wheel, 2.11.0+cu130 for download.pytorch.org's.
        dist = readings.torch["torch_dist"]
        freeze = (tmp_path / r.local_dir / "freeze.txt").read_text()
        assert f"torch=={dist}" in freeze.splitlines()
        # A local-version torch must be reinstalled from PyTorch's index for that build; PyPI's needs none.
        tag = dist.partition("+")[2]
        assert r.local_version_indexes.get(f"torch=={dist}") == (f"https://download.pytorch.org/whl/{tag}"
                                                                   if tag else None)
        # The backup records the environment's pip configuration, not the tool's own settings.
        config = (tmp_path / r.local_dir / "pip-config.txt").read_text()
        assert ":env:.no-input=" not in config and ":env:.disable-pip-version-check=" not in config
        # What is on the host reads back intact, checked here by sha256sum itself, and equals the local copy.
        out = run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=r.remote_dir)
        assert out.count(": OK") == len(r.files) - 1  # every file but SHA256SUMS itself
        for name in r.files:
            assert (Path(r.remote_dir) / name).read_bytes() == (tmp_path / r.local_dir / name).read_bytes()
        assert set(r.files) >= {"freeze.txt", "list.json", "inspect.json", "manifest.json", "SHA256SUMS"}
    finally:
        shutil.rmtree(r.remote_dir, ignore_errors=True)  # this test's own backup


# --------------------------------------------------------------------------- run_bench with a real GPU workload


def bench(pool, ctx, host: str, label: str, batch: int, runs: int, compare_to: str | None = None,
          cwd: str | None = None):
    command = f"python3 benchmarks/gpu_decode.py --batch {batch} --tokens 64 --prompt 16"
    args = dict(host=host, command=command, parser="json:decode_tok_s", runs=runs, warmup=0, label=label,
                cwd=cwd, timeout=600)
    if compare_to:
        args["compare_to"] = compare_to
    tool = RunBench()
    parsed = tool.parse_args(args)
    # The gate runs the project's own benchmark, from the directory the agent runs in, without
    # asking: a read-only workload. After a `cd` elsewhere, benchmarks/ could be any file: not read-only.
    expected = RiskClass.READ_ONLY if cwd is None else RiskClass.MUTATING
    assert classify_workload(bench_subject(parsed)).cls is expected
    result = tool.run(ctx, parsed)
    print(tool.render(result))
    return result


def run_records(result, artifacts_root: Path) -> list[dict]:
    """The JSON line of each measured run, from the whole outputs run_bench kept."""
    records = []
    for rel in result.artifacts:
        text = (artifacts_root / rel).read_text()
        stdout = text.split("--- stdout ---\n", 1)[1].split("\n--- stderr ---", 1)[0]
        records.append(json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1]))
    return records


def test_run_bench_decode_throughput_batch_1_against_batch_8(local_pool, readings, tmp_path):
    ctx = ctx_for(local_pool, tmp_path)
    b1 = bench(local_pool, ctx, "gpu", "batch1", 1, runs=3)
    b8 = bench(local_pool, ctx, "gpu", "batch8", 8, runs=3, compare_to="batch1")
    for result, batch in ((b1, 1), (b8, 8)):
        assert result.metric == "decode_tok_s" and len(result.values) == 3
        assert all(math.isfinite(v) and v > 0 for v in result.values)
        assert result.median == statistics.median(result.values)
        assert result.spread == pytest.approx(max(result.values) - min(result.values))
        records = run_records(result, tmp_path)
        assert [rec["decode_tok_s"] for rec in records] == result.values
        for rec in records:
            assert (rec["batch"], rec["mode"], rec["device"], rec["torch"]) == \
                   (batch, "eager", readings.query[0]["name"], readings.torch["torch"])
            assert rec["capability"] == readings.query[0]["compute_cap"]
    c = b8.comparison
    assert c is not None and c.baseline_label == "batch1" and c.higher_is_better is True
    assert c.ratio == round(b8.median / b1.median, 4)
    apart = max(b8.values) < min(b1.values) or max(b1.values) < min(b8.values)
    assert c.significant == apart
    assert ("ranges do not overlap" in c.verdict) == apart


def test_run_bench_over_ssh_reads_the_same_metric(ssh_pool, readings, tmp_path):
    ctx = ctx_for(ssh_pool, tmp_path)
    r = bench(ssh_pool, ctx, "gpu-ssh", "ssh", 1, runs=1, cwd=str(REPO))  # the SSH user's home is elsewhere
    (record,) = run_records(r, tmp_path)
    assert r.values == [record["decode_tok_s"]] and record["device"] == readings.query[0]["name"]
