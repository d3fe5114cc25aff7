"""The backup that counts is the one that undoes the step: the real gate and the real tools' actions."""

from __future__ import annotations

from agent.safety.authorizations import Authorization
from agent.safety.policy import SafetyPolicy
from tools import default_tools
from tools.base import BackupRecord, Registry

REGISTRY = Registry(default_tools())
INDEX = "https://download.pytorch.org/whl/cu130"


def backup(target: str, backup_id: str = "bk-1") -> BackupRecord:
    return BackupRecord(backup_id=backup_id, host="gpu1", kind="pip-freeze", target=target, created_at=0.0,
                        remote_dir=f"/var/backups/{backup_id}", files={"freeze.txt": "0" * 64, "system.txt": "1" * 64},
                        verified=True)


def decide(gate: SafetyPolicy, tool: str, args: dict):
    t = REGISTRY.get(tool)
    return gate.decide(tool, t.action(t.parse_args({"host": "gpu1", **args})))


def scripted(*rules: Authorization, backups=()) -> SafetyPolicy:
    gate = SafetyPolicy(scope={"gpu1"}, mode="scripted", authorizations=list(rules),
                        default_python={"gpu1": "/usr/bin/python3"})
    for b in backups:
        gate.ledger.register(b)
    return gate


def test_a_backup_of_the_system_python_does_not_unlock_a_pip_change_into_a_venv():
    rule = Authorization(host="gpu1", tool="pip_install",
                         args={"index_url": INDEX, "packages": ["torch==2.10.0+cu130"], "python": "/opt/venv/bin/python"})
    call = {"index_url": INDEX, "packages": ["torch==2.10.0+cu130"], "python": "/opt/venv/bin/python"}
    d = decide(scripted(rule, backups=[backup("/usr/bin/python3")]), "pip_install", call)
    assert (d.verdict.value, d.rule) == ("deny", "no-backup")
    assert "take pip_freeze_backup with python=/opt/venv/bin/python" in d.reason
    assert "backed up: /usr/bin/python3" in d.reason
    # The venv's own backup, spelt another way, is the one that counts.
    d = decide(scripted(rule, backups=[backup("/opt/venv//bin/python3", "bk-venv")]), "pip_install", call)
    assert (d.verdict.value, d.backup_id) == ("allow", "bk-venv")


def test_a_pip_change_without_python_needs_the_backup_of_the_hosts_default_interpreter():
    rule = Authorization(host="gpu1", tool="pip_install", args={"index_url": INDEX, "packages": ["torch==*"]})
    call = {"index_url": INDEX, "packages": ["torch==2.10.0+cu130"]}
    d = decide(scripted(rule, backups=[backup("/opt/venv/bin/python")]), "pip_install", call)
    assert d.rule == "no-backup" and "python left out (the host's default interpreter, /usr/bin/python3)" in d.reason
    assert decide(scripted(rule, backups=[backup("/usr/bin/python3")]), "pip_install", call).allowed


def test_a_change_no_backup_undoes_needs_a_rule_that_says_irreversible():
    command = "apt-get install -y nvidia-driver-590"
    d = decide(scripted(Authorization(host="gpu1", command=command), backups=[backup("/usr/bin/python3")]),
               "ssh_exec", {"command": command})
    assert (d.verdict.value, d.rule) == ("deny", "irreversible")
    assert "the driver is recorded by a backup, not put back" in d.reason
    assert '"irreversible": true' in d.reason
    d = decide(scripted(Authorization(host="gpu1", command=command, irreversible=True),
                        backups=[backup("/usr/bin/python3")]), "ssh_exec", {"command": command})
    assert d.allowed and "irreversible" in d.reason
    assert "irreversible: true" in Authorization(host="gpu1", command=command, irreversible=True).describe()


def test_a_toolkit_change_needs_a_backup_with_a_system_reading():
    args = {"runfile": "/srv/cuda_13.0.1_580.82.07_linux.run", "checksum": "0" * 32, "version": "13.0"}
    t = REGISTRY.get("install_runfile")
    rule = Authorization(host="gpu1", tool="install_runfile",
                         args=t.action(t.parse_args({"host": "gpu1", **args})).args)
    no_reading = backup("/usr/bin/python3").model_copy(update={"files": {"freeze.txt": "0" * 64}})
    d = decide(scripted(rule, backups=[no_reading]), "install_runfile", args)
    assert d.rule == "no-backup" and "system.txt" in d.reason
    assert decide(scripted(rule, backups=[backup("/usr/bin/python3")]), "install_runfile", args).allowed


def test_a_toolkit_installed_where_no_backup_lists_it_needs_a_rule_that_says_irreversible():
    """A backup lists /usr/local/cuda-* and a restore removes only those: a toolkit in /opt is not undone by one
    (found by a played model that installed into /opt on a rule's say-so, told the backup would roll it back)."""
    t = REGISTRY.get("install_runfile")
    args = {"runfile": "/srv/cuda_13.0.1_580.82.07_linux.run", "checksum": "0" * 32, "version": "13.0",
            "toolkit_path": "/opt/cuda-13.0"}
    pinned = t.action(t.parse_args({"host": "gpu1", **args})).args
    d = decide(scripted(Authorization(host="gpu1", tool="install_runfile", args=pinned),
                        backups=[backup("/usr/bin/python3")]), "install_runfile", args)
    assert (d.verdict.value, d.rule) == ("deny", "irreversible")
    assert "a toolkit installed anywhere else is neither recorded nor removed" in d.reason
    d = decide(scripted(Authorization(host="gpu1", tool="install_runfile", args=pinned, irreversible=True),
                        backups=[backup("/usr/bin/python3")]), "install_runfile", args)
    assert d.allowed
    for listed in ("/usr/local/cuda-13.0", "/usr/local/cuda-13.0/", "/usr/local//cuda-13.0"):
        a = {**args, "toolkit_path": listed}
        rule = Authorization(host="gpu1", tool="install_runfile", args=t.action(t.parse_args({"host": "gpu1", **a})).args)
        assert decide(scripted(rule, backups=[backup("/usr/bin/python3")]), "install_runfile", a).allowed, listed


def test_a_command_of_unknown_effect_keeps_the_rule_of_any_backup_of_the_host():
    command = "systemctl restart sglang"
    gate = scripted(Authorization(host="gpu1", command=command), backups=[backup("/opt/venv/bin/python")])
    assert decide(gate, "ssh_exec", {"command": command}).allowed


def test_every_system_package_manager_needs_a_rule_that_says_irreversible():
    # The red team found dnf unknown as a package manager (apt was known): its installs ran on any backup.
    for command in ("sudo -n dnf install -y htop", "yum install -y htop", "zypper install -y htop"):
        gate = scripted(Authorization(host="gpu1", command=command), backups=[backup("/usr/bin/python3")])
        d = decide(gate, "ssh_exec", {"command": command})
        assert (d.verdict.value, d.rule) == ("deny", "irreversible"), (command, d.reason)
        gate = scripted(Authorization(host="gpu1", command=command, irreversible=True),
                        backups=[backup("/usr/bin/python3")])
        assert decide(gate, "ssh_exec", {"command": command}).allowed, command
