"""A real change on a real GPU machine, and its rollback: pip_install, then restore_backup, on the torch environment.

The environment that holds torch is backed up, changed with pip_install from a file:// index of
wheels carried to the machine (tests/gpu/change_support.py: two packages torch imports move to
another version, one new package comes in), checked through torch's own interpreter, restored
with restore_backup from the same index, and proven equal to the backup by `pip freeze --all`
read directly. If anything fails part-way, the test puts the environment back with pip itself
before it reports, so the machine is never left changed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from change_support import plan_change

from tools.base import ArtifactStore, ToolContext, ToolError
from tools.pip_freeze_backup import PipFreezeBackup, parse_freeze
from tools.pip_install import PipInstall
from tools.restore_backup import RestoreBackup

from gpu_support import clean_env, gpu_python, run

pytestmark = pytest.mark.gpu

IMPORTS = ("import json, filelock, typing_extensions, torch; from importlib import metadata; "
           "print(json.dumps({n: metadata.version(n) for n in ('filelock', 'typing_extensions', 'torch')} "
           "| {'cuda': torch.cuda.is_available()}))")


def freeze_now() -> str:
    return run([gpu_python(), "-m", "pip", "freeze", "--all"])


def imported_versions() -> dict:
    return json.loads(run([gpu_python(), "-c", IMPORTS]).strip().splitlines()[-1])


def put_back(freeze_text: str, index_url: str, tmp_path: Path) -> None:
    """The environment as it was, with pip alone: the safety net of this test, not what it tests."""
    now = parse_freeze(freeze_now())
    want = parse_freeze(freeze_text)
    extra = [n for n in now if n not in want and n not in {"pip", "setuptools", "wheel"}]
    if extra:
        subprocess.run([gpu_python(), "-m", "pip", "uninstall", "-y", *extra], env=clean_env(), check=False)
    changed = [line for n, line in want.items() if now.get(n) != line]
    if changed:
        subprocess.run([gpu_python(), "-m", "pip", "install", "--no-deps", "--index-url", index_url, *changed],
                       env=clean_env(), check=False)


def test_pip_install_changes_the_torch_environment_and_restore_backup_brings_it_back(local_pool, tmp_path):
    ctx = ToolContext(hosts=local_pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
    original = freeze_now()
    plan = plan_change(parse_freeze(original), tmp_path / "index")
    before_imports = imported_versions()
    backup = PipFreezeBackup().run(ctx, PipFreezeBackup().parse_args({"host": "gpu"}))
    ctx.known_backup = lambda backup_id: backup.backup if backup_id == backup.backup_id else None
    try:
        assert backup.verified
        assert (Path(backup.remote_dir) / "freeze.txt").read_text().splitlines() == original.splitlines()

        tool = PipInstall()
        result = tool.run(ctx, tool.parse_args({"host": "gpu", "packages": plan.pins, "index_url": plan.index_url}))
        print(tool.render(result))
        # The freeze diff the tool reports is the change, and only it: two moved, one new.
        changes = {c.package: (c.before, c.after) for c in result.changes}
        expected = {n: (f"{n}=={now}", f"{n}=={after}") for n, (now, after) in plan.moved.items()}
        expected[plan.added.split("==")[0]] = (None, plan.added)
        assert {n: (b and b.lower().replace("_", "-"), a and a.lower().replace("_", "-"))
                for n, (b, a) in changes.items()} == expected
        assert result.index_urls == [plan.index_url]
        # pip's dependency warnings are what `pip check` says directly (on the H200 machine: anyio wants a
        # newer typing_extensions), and none of them is about torch, which accepts the moved versions.
        check = subprocess.run([gpu_python(), "-m", "pip", "check"], capture_output=True, text=True, env=clean_env())
        assert result.dependency_warnings == [ln for ln in check.stdout.splitlines()
                                              if ln.strip() and "No broken requirements" not in ln]
        assert not any(w.startswith("torch ") for w in result.dependency_warnings)
        # What torch's interpreter imports now, read directly: the moved versions, torch itself unchanged.
        after_imports = imported_versions()
        for name, (_, after) in plan.moved.items():
            assert after_imports[name.replace("-", "_")] == after
        assert after_imports["torch"] == before_imports["torch"] and after_imports["cuda"] is True

        restore = RestoreBackup()
        changed = freeze_now()
        try:  # from the index the host's pip configuration names: PyPI, which a machine without a route lacks
            restore.run(ctx, restore.parse_args({"host": "gpu", "backup_id": backup.backup_id}))
        except ToolError as e:
            print(f"without index_url: {e}")
            assert str(e).startswith("nothing was changed:") and "give index_url" in str(e)
            assert freeze_now() == changed, "a restore that cannot fetch its pins uninstalls nothing"
        restored = restore.run(ctx, restore.parse_args({"host": "gpu", "backup_id": backup.backup_id,
                                                        "index_url": plan.index_url}))
        print(restore.render(restored))
        assert restored.restored and restored.remaining_diff == []
        if restored.installed:  # else the restore above reached PyPI and did the work
            assert restored.uninstalled == [plan.added.split("==")[0]]
            assert len(restored.installed) == len(plan.moved)
        # Proven directly, not by the tool: the freeze is the backup's, line for line.
        assert freeze_now().splitlines() == original.splitlines()
        assert imported_versions() == before_imports
    finally:
        if freeze_now() != original:
            put_back(original, plan.index_url, tmp_path)
        shutil.rmtree(backup.remote_dir, ignore_errors=True)  # this test's own backup
