"""`agent show` of a fleet's record shows a fleet: its hosts, their outcomes and transcripts, not a model session.

Real `agent demo` (the canary), `agent recipe`, `agent fleet` on one simulated host and `agent show`."""

from __future__ import annotations

import json

import pytest
from fleet_runs import agent, canary_recipe, events
from test_fleet import inventory

pytestmark = pytest.mark.timeout(900)


def test_show_of_a_fleet_record_lists_its_hosts_outcomes_and_transcripts(tmp_path):
    recipe = canary_recipe(tmp_path)
    out = tmp_path / "rollout"
    r = agent("fleet", str(recipe), "-i", str(inventory(tmp_path / "hosts.ini", {"gpu01": ""})), "--dir", str(out),
              home=tmp_path)
    fleet = out / "fleet.jsonl"
    assert fleet.exists(), r.stderr[-2000:]
    (host,) = [e for e in events(fleet) if e["type"] == "fleet_host"]
    shown = agent("show", str(fleet), home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "model None" not in shown.stdout and "None turns" not in shown.stdout and "dry run" not in shown.stdout
    assert "fleet of 1 host(s)" in shown.stdout and f"gpu01: {host['ended']}" in shown.stdout
    assert f"transcript: {host['transcript']}" in shown.stdout and "result: " in shown.stdout
    as_json = [json.loads(line) for line in agent("show", str(fleet), "--json", home=tmp_path).stdout.splitlines()]
    assert [h["host"] for h in as_json] == ["gpu01"]
    report = agent("show", str(fleet), "--report", home=tmp_path)
    assert report.returncode == 2 and "is a fleet's record: its report is" in report.stderr
    assert report.stderr.count("\n") == 1 and "Nothing was verified" not in report.stdout + report.stderr
    # A host's own transcript under the rollout is a session: shown, and reported, as any other.
    hosted = agent("show", host["transcript"], home=tmp_path)
    assert hosted.returncode == 0 and "fleet of" not in hosted.stdout and "install_runfile" in hosted.stdout, \
        hosted.stdout[-2000:]
    page = tmp_path / "host.html"
    made = agent("show", host["transcript"], "--report", "--html", str(page), home=tmp_path)
    assert made.returncode == 0 and page.is_file(), made.stderr
