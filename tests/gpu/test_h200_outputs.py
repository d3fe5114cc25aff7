"""The parsers against what a real NVIDIA H200 machine printed (tests/data/gpu/h200/); runs everywhere.

Each fact inspect_host reads from its script's output is checked against the same fact as another
program of that machine printed it (nvidia-smi's query, nvcc, torch, the driver API).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tools.inspect_host import Toolkit, parse_inspection, parse_nvcc, parse_nvidia_smi_header
from tools.pip_freeze_backup import configured_index_urls, without_own_settings
from tools.run_bench import read_metric

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu" / "h200"
DISK = ["/tmp", "/usr/local", "/var/tmp"]
VENV = "/opt/torch/.venv/bin/python3"


def text(name: str) -> str:
    return (DATA / name).read_text()


def inspect(name: str, python: str = VENV):
    return parse_inspection(text(name), host="h200", cuda_root="/usr/local", python=python, disk_paths=DISK)


def query() -> dict[str, str]:
    header, row = text("nvidia-smi-query.csv").strip().splitlines()
    return dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(","))))


def test_inspect_host_reads_the_h200_as_its_other_programs_do():
    r = inspect("inspect_host_script.txt")
    q, torch = query(), json.loads(text("torch.json"))
    assert r.os == "Ubuntu 24.04.3 LTS" and r.kernel.startswith("Linux 6.18.44") and r.kernel.endswith("x86_64")
    assert r.driver.version == q["driver_version"] == "580.159.04"
    assert r.driver.cuda_version == torch["driver_cuda"] == "13.0"
    assert r.driver == parse_nvidia_smi_header(text("nvidia-smi.txt"))
    gpus = [(g.index, g.name, g.compute_capability, g.memory_total_mib) for g in r.gpus]
    assert gpus == [(0, q["name"], q["compute_cap"], int(q["memory.total [MiB]"].split()[0]))]
    assert gpus == [(0, "NVIDIA H200", "9.0", 143771)]
    assert [g.name for g in r.gpus] == torch["names"]
    assert [g.compute_capability for g in r.gpus] == torch["capabilities"]
    assert r.toolkit_on_path == Toolkit(path="/usr/local/cuda/bin/nvcc", version="13.0")
    assert (r.toolkit_on_path.version, r.nvcc_build) == parse_nvcc(text("nvcc-version.txt"))
    assert r.nvcc_build == "cuda_13.0.r13.0/compiler.36424714_0"
    assert r.cuda_symlink == "/usr/local/cuda-13.0"
    py = r.python
    assert (py.executable, py.version, py.torch, py.torch_cuda, py.cuda_available, py.device_count) == \
           (torch["executable"], "3.12.3", torch["torch"], torch["torch_cuda"], True, torch["device_count"])
    assert py.packages["torch"] == torch["torch_dist"] == "2.11.0"
    assert [(d.path, d.mount, d.total_gib) for d in r.disk] == [(p, "/", 252.0) for p in DISK]


def test_one_toolkit_with_its_alternatives_link_is_listed_once():
    # Ubuntu's packages add /usr/local/cuda-13 -> /etc/alternatives/cuda-13 -> /usr/local/cuda-13.0.
    assert "/usr/local/cuda-13|release 13.0|/usr/local/cuda-13.0" in text("inspect_host_script.txt")
    r = inspect("inspect_host_script.txt")
    assert r.toolkits == [Toolkit(path="/usr/local/cuda-13.0", version="13.0", links=["/usr/local/cuda-13"])]


def test_a_toolkit_line_without_a_link_field_still_parses():
    # The script's output before it printed where links resolve (two fields).
    old = re.sub(r"^(/usr/local/cuda-[0-9.]+\|release [0-9.]+)\|.*$", r"\1", text("inspect_host_script.txt"),
                 flags=re.M)
    r = parse_inspection(old, host="h200", cuda_root="/usr/local", python=VENV, disk_paths=DISK)
    assert [t.path for t in r.toolkits] == ["/usr/local/cuda-13", "/usr/local/cuda-13.0"]
    assert all(t.links is None for t in r.toolkits)


def test_a_pypi_torch_is_named_without_its_cuda_tag_and_the_note_says_so():
    r = inspect("inspect_host_script.txt")
    assert r.notes == ["torch reports 2.11.0+cu130 but pip lists it as torch==2.11.0: a wheel from PyPI, whose "
                       "version does not name its CUDA build (cu130); torch==2.11.0+cu130 exists only on the index "
                       "that names it (e.g. https://download.pytorch.org/whl/cu130)"]


def test_a_bare_host_entry_finds_no_nvcc_and_no_torch_and_says_where_nvcc_is():
    r = inspect("inspect_host_script_bare.txt", python="python3")
    assert r.driver.version == "580.159.04" and r.gpu_count == 1  # nvidia-smi is on the standard PATH too
    assert r.toolkit_on_path is None
    assert "no nvcc on PATH" in r.notes
    assert any(n.startswith("/usr/local/cuda/bin/nvcc is there (release 13.0, /usr/local/cuda-13.0) but not on "
                            "PATH") for n in r.notes)
    assert r.python.executable == "/usr/bin/python3" and r.python.torch is None
    assert r.python.error == "ModuleNotFoundError: No module named 'torch'"


def test_backup_keeps_the_pip_config_of_the_environment_not_its_own_settings():
    listed = text("pip-config-list.txt")
    assert ":env:.no-input='1'" in listed  # what pip printed while the tool's PIP_NO_INPUT was set
    kept = without_own_settings(listed)
    assert kept == "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
    assert configured_index_urls(kept, []) == []


def test_gpu_decode_lines_are_read_by_the_json_parser():
    for mode, name in (("eager", "gpu_decode_eager.txt"), ("compile", "gpu_decode_compile.txt")):
        record = json.loads(text(name))
        assert record["mode"] == mode and record["device"] == "NVIDIA H200"
        assert read_metric("json:decode_tok_s", "decode_tok_s", text(name)).value == record["decode_tok_s"]


def test_check_outputs_on_a_real_gpu_told_a_numerics_change_from_a_harmless_one():
    """tests/gpu/outputs_check.py on an NVIDIA H100 (tests/data/gpu/h100/outputs-check.json): the greedy outputs of
    gpu_decode.py's model served on the GPU were the same across a restart and across the recorded pip change
    (typing_extensions and filelock moved, then restored), and differed once the weights were served in float16;
    the goal's outputs check (`same: true`) passed the first three and failed the last."""
    record = json.loads((DATA.parent / "h100" / "outputs-check.json").read_text())
    labels = record["labels"]
    assert record["versions_changed"] != record["versions_before"] == record["versions_restored"]
    before = labels["before"]
    assert before["server"]["torch_cuda"] == "13.0" and before["prompts"] == 16
    for label in ("again", "after-change", "restored"):
        assert labels[label]["digest"] == before["digest"] and labels[label]["same_outputs"], label
        assert labels[label]["outputs_check_same"]["ok"] is True, label
    fp16 = labels["float16"]
    assert fp16["server"]["dtype"] == "float16" and fp16["digest"] != before["digest"]
    assert not fp16["same_outputs"] and len(fp16["differing"]) >= 4
    assert fp16["outputs_check_same"]["ok"] is False
    assert "the check asks for the same outputs" in fp16["outputs_check_same"]["detail"]
