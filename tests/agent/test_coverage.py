"""The approval panel names the backup that really undoes a step, or says that none does: a pip freeze
is no safety net for deleting a CUDA toolkit. The real gate and the real tools' actions are asked."""

from __future__ import annotations

import pytest

from agent.safety.policy import ApprovalAnswer, SafetyPolicy
from app.ui import approval_rows
from tools import default_tools
from tools.base import BackupRecord, Registry

REGISTRY = Registry(default_tools())
VENV = "/opt/torch/.venv/bin/python"


def backup(backup_id: str, target: str = VENV, system: bool = True) -> BackupRecord:
    files = {"freeze.txt": "0" * 64, **({"system.txt": "1" * 64} if system else {})}
    return BackupRecord(backup_id=backup_id, host="gpu1", kind="pip-freeze", target=target, created_at=0.0,
                        remote_dir=f"/var/backups/{backup_id}", files=files, verified=True, package_count=197)


class Asked:
    def __init__(self):
        self.requests = []

    def ask(self, request):
        self.requests.append(request)
        return ApprovalAnswer.NO


def asked(tool: str, args: dict, *backups: BackupRecord):
    approver = Asked()
    gate = SafetyPolicy(scope={"gpu1"}, mode="interactive", approver=approver)
    for b in backups:
        gate.ledger.register(b)
    t = REGISTRY.get(tool)
    gate.decide(tool, t.action(t.parse_args({"host": "gpu1", **args})))
    (request,) = approver.requests
    return request


def shell(command: str, *backups: BackupRecord):
    return asked("ssh_exec", {"command": command}, *backups)


@pytest.mark.parametrize("command", ["rm -rf /usr/local/cuda-12.8", "rm -rf /usr/local/cuda/",
                                     "sudo apt-get purge -y cuda-toolkit-12-8"])
def test_deleting_a_toolkit_is_undone_by_no_backup_and_the_panel_says_so(command):
    request = shell(command, backup("bk-1"))
    assert request.undo.backup is None
    assert "not their files" in request.undo.says
    rows = dict(approval_rows(request))
    # The backup the gate needed is named, with the warning that it is no safety net here.
    assert rows["backup"].startswith("none undoes this step (bk-1 (pip-freeze, 197 packages of " + VENV)
    assert "a removed toolkit comes back only from its installer" in rows["undo"]


def test_a_pip_change_names_the_backup_of_its_own_environment_not_the_latest_one():
    ours, other = backup("bk-venv"), backup("bk-sys", target="/usr/bin/python3")
    request = shell("/opt/torch/.venv/bin/pip install -U requests", ours, other)
    assert request.backup.backup_id == "bk-venv"  # the one the gate needs before it asks
    assert request.undo.backup.backup_id == "bk-venv"
    assert dict(approval_rows(request))["backup"].startswith("bk-venv (pip-freeze, 197 packages of " + VENV)
    assert request.undo.says == f"restore_backup bk-venv puts the packages of {VENV} back as they were"
    # An environment nobody backed up is undone by nothing: the gate does not ask, it names the backup to take.
    gate = SafetyPolicy(scope={"gpu1"}, mode="interactive", approver=Asked())
    gate.ledger.register(ours)
    t = REGISTRY.get("pip_install")
    refused = gate.decide("pip_install", t.action(t.parse_args({
        "host": "gpu1", "packages": ["requests==2.32.3"], "index_url": "https://pypi.org/simple",
        "python": "/srv/other/bin/python"})))
    assert refused.rule == "no-backup"
    assert "take pip_freeze_backup with python=/srv/other/bin/python" in refused.reason


def test_the_panel_says_whether_the_backups_rollback_was_rehearsed():
    found = backup("bk-1").model_copy(update={"rehearsed": False})
    request = shell("/opt/torch/.venv/bin/python -m pip install x", found)
    assert request.undo.says.endswith("but its rehearsal found pins a restore could not fetch: it needs an "
                                      "index_url that holds them")
    fine = backup("bk-2").model_copy(update={"rehearsed": True})
    assert shell("/opt/torch/.venv/bin/pip install x", fine).undo.says.endswith(
        "; rehearsed: every pin can be fetched again")


def test_a_bare_pip_is_covered_only_if_it_is_the_backed_up_one_and_the_panel_says_that():
    request = shell("pip install requests", backup("bk-1"))
    assert request.undo.backup.backup_id == "bk-1"
    assert request.undo.says.endswith("if that is the `pip` this command finds first on PATH")


def test_a_side_by_side_toolkit_and_the_cuda_link_are_undone_by_the_system_reading():
    args = {"runfile": "/srv/cuda_13.0.1_580.82.07_linux.run", "checksum": "0" * 32, "version": "13.0",
            "move_symlink": True}
    request = asked("install_runfile", args, backup("bk-1"))
    assert request.undo.backup.backup_id == "bk-1"
    assert "restore_backup bk-1 system=true removes the toolkits installed since and puts the cuda link back" \
        == request.undo.says
    link = shell("ln -sfn /usr/local/cuda-13.0 /usr/local/cuda", backup("bk-1"))
    assert link.undo.backup.backup_id == "bk-1"
    apt = shell("apt-get install -y cuda-toolkit-13-0", backup("bk-1"))
    assert apt.undo.says.endswith("the packages apt installed are listed, to remove by hand")
    # A backup taken before system readings existed undoes none of it: the gate does not ask, it refuses.
    gate = SafetyPolicy(scope={"gpu1"}, mode="interactive", approver=Asked())
    gate.ledger.register(backup("bk-old", system=False))
    t = REGISTRY.get("install_runfile")
    refused = gate.decide("install_runfile", t.action(t.parse_args({"host": "gpu1", **args})))
    assert refused.rule == "no-backup" and "that recorded its system state (system.txt" in refused.reason


@pytest.mark.parametrize("command, words", [
    ("apt-get install -y nvidia-driver-590", "the driver is recorded by a backup, not put back"),
    ("sh cuda_13.0.1_580.82.07_linux.run --silent", "the driver is recorded by a backup, not put back"),
    ("apt-get install -y libnccl2", "system packages are recorded and compared by a backup, not put back"),
    ("conda install -y numpy", "a pip-freeze backup does not put conda packages back"),
    ("systemctl restart nvidia-persistenced", "none is known to undo this command"),
])
def test_what_no_backup_puts_back_is_said_as_such(command, words):
    request = shell(command, backup("bk-1"))
    assert request.undo.backup is None and words in request.undo.says
