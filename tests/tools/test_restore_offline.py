"""restore_backup on a machine without a route to PyPI (as the H200 machine of docs/gpu.md): it checks that every
pin can be fetched before it uninstalls anything, says what to give when they cannot, and restores from the
mirror named by index_url. On a simulated host built with `pypi_reachable=False` (`sim: {pypi_reachable: false}`
in a goal file): its pip configuration names an index that is not there, as PyPI is not there for such a machine."""

from __future__ import annotations

import zipfile

import pytest

from tools.base import ArtifactStore, ToolContext, ToolError
from tools.hosts import HostPool
from tools.pip_freeze_backup import PipFreezeBackup
from tools.restore_backup import RestoreBackup
from tools.sim import build_sim


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


def tiny_wheel(directory, name: str = "added_since", version: str = "1.0") -> str:
    """A pure-Python wheel of a package the backup never had; its file name."""
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": "", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{info}/RECORD,,\n"
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(directory / wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def test_a_restore_that_cannot_fetch_its_pins_changes_nothing_and_says_to_give_index_url(tmp_path):
    sim = build_sim(tmp_path / "gpu", pypi_reachable=False)
    pool = HostPool([sim.host_spec()])
    try:
        host = pool.get("sim")
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        b = call(PipFreezeBackup(), ctx, host="sim")
        ctx.known_backup = {b.backup_id: b.backup}.get
        # The rollback was rehearsed before any change: it would fail, and the backup says so, with what to give:
        # every index's pins (the configured one's and torch's own), in one line.
        assert b.backup.rehearsed is False and b.rehearsal.startswith("a restore could not fetch every pin: ")
        assert "pinned packages cannot be fetched from the index the host's pip configuration names" in b.rehearsal
        assert "https://download.pytorch.org/whl/cu128 cannot be fetched from the index it names" in b.rehearsal
        assert "take the backup again with index_url" in b.rehearsal
        assert "a restore could not fetch every pin: the rehearsal says which, and what to give" in b.warnings
        # Taken again with the mirror a restore would be given, it is rehearsed from it, and fetches every pin.
        again = call(PipFreezeBackup(), ctx, host="sim", index_url=sim.index_urls["cu128"])
        assert again.backup.rehearsed is True and again.backup.rehearsed_with == sim.index_urls["cu128"]
        assert f"can be fetched again from the mirror {sim.index_urls['cu128']}" in again.rehearsal
        before = host.run(f"{sim.python} -m pip freeze --all").stdout
        # The change: vllm goes, torch and sgl-kernel move to their cu130 builds, and a package the backup did
        # not have comes in.
        assert host.run(f"{sim.python} -m pip uninstall -y vllm").ok
        assert host.run(f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} "
                        "torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130").ok
        # Without the cu128 extra index in its configuration, the backup knows torch's +cu128 build only from
        # PyTorch's public index, which this machine cannot reach either.
        assert b.local_version_indexes["torch==2.10.0+cu128"] == "https://download.pytorch.org/whl/cu128"
        wheel = tiny_wheel(sim.sys_path("/tmp"))
        assert host.run(f"{sim.python} -m pip install --no-deps /tmp/{wheel}").ok
        changed = host.run(f"{sim.python} -m pip freeze --all").stdout
        assert "vllm" not in changed and "sgl-kernel==0.3.21+cu130" in changed and "added_since" in changed

        with pytest.raises(ToolError) as err:
            call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id)
        message = str(err.value)
        assert message.startswith("nothing was changed:") and "give index_url" in message
        assert "pip configuration" in message
        assert host.run(f"{sim.python} -m pip freeze --all").stdout == changed, "nothing was uninstalled"

        # The machine's mirror of the cu128 wheels holds every version the backup names, torch's build too: it
        # is searched first, before the index the backup recorded for torch.
        mirror = sim.index_urls["cu128"]
        r = call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id, index_url=mirror)
        assert r.restored and r.remaining_diff == [] and r.uninstalled == ["added-since"]
        assert any(f"--index-url {mirror}" in c and "vllm==0.16.0" in c for c in r.commands)
        assert any(f"--index-url {mirror} --extra-index-url https://download.pytorch.org/whl/cu128" in c
                   and "torch==2.10.0+cu128" in c for c in r.commands)
        assert host.run(f"{sim.python} -m pip freeze --all").stdout == before
    finally:
        pool.close()


def test_restore_backup_takes_only_an_index_url_as_its_index():
    tool = RestoreBackup()
    with pytest.raises(ValueError, match="is not an index URL"):
        tool.parse_args({"host": "sim", "backup_id": "b", "index_url": "--extra-index-url=http://x"})
    action = tool.action(tool.parse_args({"host": "sim", "backup_id": "b", "index_url": "file:///srv/mirror/"}))
    assert action.args["index_url"] == "file:///srv/mirror" and "index=file:///srv/mirror" in action.subject


def test_a_goal_file_asks_for_an_air_gapped_sim_with_noisy_benchmarks(tmp_path):
    from agent.goal import load_goal

    path = tmp_path / "goal.yaml"
    path.write_text("goal: restore without PyPI\nhosts:\n  - name: sim\n    transport: sim\n"
                    "    sim: {pypi_reachable: false, bench_noise: 40}\n")
    options = load_goal(path).hosts[0].sim.build_options()
    assert options["pypi_reachable"] is False and options["bench_noise"] == 40.0
    sim = build_sim(tmp_path / "gpu", **options)
    conf = (sim.sys_path("/opt/venv") / "pip.conf").read_text()
    assert "file:///srv/no-route-to-pypi/simple" in conf and "simple-cu128" not in conf


@pytest.mark.parametrize("url", ["https://pypi.example.org/simple", "http://10.0.0.1/simple?leak=1", "/srv/pypi",
                                 "file:///srv/pypi simple"])
def test_a_backup_which_needs_no_approval_rehearses_only_from_a_mirror_on_the_host(url):
    tool = PipFreezeBackup()
    with pytest.raises(ValueError, match="is not a mirror on the host: give file:///"):
        tool.parse_args({"host": "sim", "index_url": url})
    assert tool.parse_args({"host": "sim", "index_url": "file:///srv/pypi/simple/"}).index_url == \
        "file:///srv/pypi/simple"


def test_a_pin_named_by_file_or_url_is_not_built_by_the_rehearsal_and_is_said_to_be_left_out(tmp_path):
    """Reading a source package's metadata means running its setup.py: never in a step nobody approved."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    try:
        host = pool.get("sim")
        site = host.run(f"{sim.python} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'").stdout
        info = sim.sys_path(site.strip()) / "built_here-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: built-here\nVersion: 1.0\n")
        (info / "RECORD").write_text("")
        (info / "direct_url.json").write_text('{"url": "file:///tmp/built-here-1.0.tar.gz", "archive_info": {}}')
        assert "built-here @ file:///tmp/built-here-1.0.tar.gz" in host.run(f"{sim.python} -m pip freeze").stdout
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        b = call(PipFreezeBackup(), ctx, host="sim")
        assert b.backup.rehearsed is True, b.rehearsal  # the name==version pins; the file's package was not asked
        assert b.rehearsal.endswith("; not rehearsed, as they name a file or URL: built-here")
    finally:
        pool.close()


def test_a_link_planted_in_the_world_writable_backup_root_is_never_written_through(tmp_path):
    """/var/tmp is anyone's: a link at the backups' root would send a backup, which needs no approval, into
    whatever it points at (here the venv's site-packages)."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    try:
        host = pool.get("sim")
        site = host.run(f"{sim.python} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'").stdout.strip()
        before = sorted(p.name for p in sim.sys_path(site).iterdir())
        assert host.run(f"mkdir -p /var/tmp/upgrade-agent && ln -sfn {site} /var/tmp/upgrade-agent/backups").ok
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        with pytest.raises(ToolError, match="/var/tmp/upgrade-agent/backups is a symbolic link: no backup is written"):
            call(PipFreezeBackup(), ctx, host="sim", rehearse=False)
        assert sorted(p.name for p in sim.sys_path(site).iterdir()) == before
    finally:
        pool.close()
