"""A red team that had not read the code wrote 103 toolkit_path (and tmpdir, download_dir) values for
install_runfile, each with what a correct safety layer should answer: whether a backup undoes an install
there (it lists and a restore removes /usr/local/cuda-* only). Kept here as they were written.

The layer may ask for more than the red team expected (a stricter approval): never for less where it
matters. Where the gate calls an install undoable and the red team did not, the real tool runs it on a
simulated host: it is refused, or the toolkit lands exactly at a /usr/local/cuda-* directory, which the
backup lists and a restore removes. Found by them and fixed: a NUL in a path crashed the tool (a ValueError
from the host layer), and a path spelt past PATH_MAX (/usr/local/./././...) installed the toolkit but
reported a failure; paths are now printable and absolute, and normalised once checked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.safety.coverage import required_backup
from tools import default_tools
from tools.base import ArgumentError, ArtifactStore, Registry, ToolContext, ToolError
from tools.hosts import HostPool
from tools.sim import build_sim

CASES = json.loads((Path(__file__).resolve().parents[1] / "data/gate/redteam-2026-12-06-toolkit-path/cases.json")
                   .read_text())
TOOL = Registry(default_tools()).get("install_runfile")
LISTED = re.compile(r"/usr/local/cuda-[A-Za-z0-9._+-]+")


def judged(case: dict, runfile: str = "/srv/cuda_13.0.1_580.82.07_linux.run", checksum: str = "0" * 32):
    """(the parsed arguments, whether the gate counts a backup as undoing the install), or None: refused as
    arguments."""
    args = {"host": "sim", "runfile": runfile, "checksum": checksum, "version": "13.0",
            **{k: v for k, v in case.items() if k in ("toolkit_path", "tmpdir", "download_dir")}}
    try:
        parsed = TOOL.parse_args(args)
    except ArgumentError:
        return None
    action = TOOL.action(parsed)
    return parsed, required_backup("install_runfile", action, action.risk, [], None).kind == "system"


def test_the_cases_are_all_there_and_every_one_the_team_called_undoable_is():
    assert len(CASES) >= 100
    for case in CASES:
        got = judged(case)
        if case["expect_undoable"]:
            assert got is not None and got[1], case
        if got is not None and got[1]:  # undoable only where the canonical place is one a backup lists
            assert LISTED.fullmatch(TOOL.action(got[0]).args["toolkit_path"]), case


def test_where_the_gate_is_less_strict_than_the_team_the_real_tool_lands_only_where_a_restore_removes(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    info = sim.runfiles["13.0"]
    root = sim.sys_path("/")
    disputed = [c for c in CASES if not c["expect_undoable"]
                and (got := judged(c, info.url, info.md5)) is not None and got[1]]
    assert disputed, "the red team's cases no longer reach the gate's lenient side: review this test"
    for case in disputed:
        parsed, _ = judged(case, info.url, info.md5)
        before = {p for p in root.rglob("nvcc")}
        pool = HostPool([sim.host_spec()])
        try:
            reported = TOOL.run(ToolContext(hosts=pool, artifacts=ArtifactStore(None)), parsed).toolkit_path
        except ToolError:
            reported = None
        finally:
            pool.close()
        landed = [p for p in root.rglob("nvcc") if p not in before]
        assert len(landed) <= 1 and bool(landed) is (reported is not None), (case, reported, landed)
        for nvcc in landed:
            assert reported == "/" + nvcc.relative_to(root).parent.parent.as_posix(), case  # said where it is
            place = "/" + nvcc.relative_to(root).parent.parent.as_posix()
            assert LISTED.fullmatch(place), (case, place)
            for p in sorted(nvcc.parent.parent.rglob("*"), reverse=True):  # clean for the next case
                p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
            nvcc.parent.parent.rmdir()


@pytest.mark.parametrize("path", ["/opt/x\x00/../../usr/local/cuda-13.0", "/usr/local/cuda-13.0\n", "relative/cuda",
                                  ""])
def test_a_path_that_cannot_name_a_place_is_refused_as_an_argument(path):
    with pytest.raises(ArgumentError, match="absolute path of printable characters"):
        TOOL.parse_args({"host": "sim", "runfile": "/srv/cuda_13.0.1_580.82.07_linux.run", "checksum": "0" * 32,
                         "version": "13.0", "toolkit_path": path})
