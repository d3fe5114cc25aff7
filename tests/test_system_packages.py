"""The test command's set-up (tests/system_packages.py): what is missing is named, and where this user cannot
install it, one line says what to install."""

import system_packages


def test_a_missing_program_names_its_package_once():
    table = {"/no/such/sshd": "openssh-server", "no-such-program-upgrade-agent": "pkg-x",
             "no-such-other-upgrade-agent": "pkg-x", "sh": "dash"}
    assert system_packages.missing(table) == ["openssh-server", "pkg-x"]


def test_without_root_the_set_up_is_one_line_that_says_what_to_install(monkeypatch):
    monkeypatch.setattr(system_packages, "_as_root", lambda: None)
    said = system_packages.install(["openssh-server", "chromium"])
    assert "\n" not in said and "openssh-server chromium" in said and "install them as root" in said
    assert system_packages.install([]) is None


def test_this_machine_has_what_the_tests_need():
    assert system_packages.missing() == []  # else the test command would have installed it, or stopped
