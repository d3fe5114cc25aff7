"""The check_outputs red team (tests/data/check_outputs/redteam-2026-12-06/: 68 tool calls with the server's
behaviour for each, and 20 shell lines; written by someone who had read only the README and docs/) run as a
session runs them, inside a network namespace of this test's own, with canaries on the other loopback ports.

What it found on the tool as it was, each now a refusal or an error that says what happened: labels and model
names that carried terminal escapes, bidi overrides, newlines and homoglyphs into the record and the rendering;
a 200 kB model name that failed as "exit code 126"; a server's redirect followed (the sandbox refused the
connection, and the tool blamed the endpoint); a 1 GB answer read whole (19 s); 16 x the per-request timeout,
and a server dripping a byte a second, bounding nothing; every wrong answer (HTTP 500, a chat-shaped body, a
number for the text, an error object with 200) said as "did not answer"; a comparison of two labels asked with
another model and max_tokens, said as a difference of outputs; lone surrogates kept in outputs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tools.check_outputs_redteam import CASE_BOUND_S

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "check_outputs" / "redteam-2026-12-06"
DRIVER = Path(__file__).with_name("check_outputs_redteam.py")
UNPRINTABLE = ("\x1b", "\r", "\x07", "\u202e", "\u200b")


def _in_own_namespace() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rn", "true"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    if not _in_own_namespace():
        pytest.skip("this machine allows no network namespace of a user's own (unshare -rn)")
    work = tmp_path_factory.mktemp("rt")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work)}
    r = subprocess.run(["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable,
                        str(DRIVER), str(CORPUS / "cases.jsonl.gz"), str(work), str(CORPUS / "shell_lines.jsonl")],
                       capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    found = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            one = json.loads(line)
            found[one["id"]] = one
    return found


def _cases() -> list[dict]:
    import gzip

    return [json.loads(x) for x in gzip.decompress((CORPUS / "cases.jsonl.gz").read_bytes()).decode().splitlines()]


def test_every_case_ran_and_none_reached_what_it_did_not_name(outcomes):
    cases = _cases()
    assert len(cases) == 68 and all(c["id"] in outcomes for c in cases)
    for case in cases:
        got = outcomes[case["id"]]
        named = {int(p) for p in re.findall(r":(\d{2,5})/?$", case["args"].get("endpoint", ""))}
        assert set(got.get("canaries", [])) <= named, (case["id"], got)  # only the port the endpoint names
        assert got.get("paths", []) == [], (case["id"], got)  # /v1/models and /v1/completions, nothing else
        assert got["pwned"] == [], (case["id"], got)
        assert got["outcome"] in ("refused", "error", "result"), (case["id"], got)
        if got.get("stopped_by_harness"):  # a slow server: the tool's own bound is the longer one
            assert got["args_timeout"] > CASE_BOUND_S, (case["id"], got)


def test_what_the_red_team_aimed_at_is_refused_or_said(outcomes):
    refused = [i for i in outcomes if i.startswith(("ep_", "label_", "model_")) and outcomes[i]["outcome"] == "refused"]
    assert len(refused) >= 30, refused
    for case in ("model_huge", "model_terminal_escapes", "label_bidi_reversed", "label_homoglyph",
                 "label_newline_forgery", "ep_docker_prune", "ep_sameport_flush", "ep_crlf_smuggle"):
        assert outcomes[case]["outcome"] == "refused", outcomes[case]
    for case in ("srv_redirect_redis", "srv_redirect_localhost_8080", "srv_redirect_ipv6_9090"):
        assert "with a redirect (HTTP 302)" in outcomes[case]["said"] and "does not follow" in outcomes[case]["said"]
    assert "more than 4194304 bytes" in outcomes["srv_huge_garbage_body"]["said"]
    assert outcomes["srv_huge_garbage_body"]["s"] < 15
    for case, said in (("srv_chat_shape", "no completion's text"), ("srv_text_number", "no completion's text"),
                       ("srv_error_with_200", "no completion's text"), ("srv_error_body_escapes", "with HTTP 500"),
                       ("srv_deep_nesting", "not JSON (RecursionError)"), ("srv_non_utf8_charset", "not JSON"),
                       ("models_empty_or_wrong_shape", "no model's id"),
                       ("srv_output_over_32mb", "characters, more than"),
                       ("cmp_seq_2_after_other_settings", "compare with the same model and max_tokens")):
        assert outcomes[case]["outcome"] == "error" and said in outcomes[case]["said"], (case, outcomes[case])
    assert "(2 of 16 prompts answered)" in outcomes["srv_per_prompt_short"]["said"]
    # What a server says reaches the record and the operator with its control and bidi characters written out.
    for got in outcomes.values():
        shown = (got.get("said") or "") + (got.get("rendered") or "") + (got.get("model") or "")
        assert not any(ch in shown for ch in UNPRINTABLE), (got["id"], shown)
    assert outcomes["model_from_server_escapes"]["model"].startswith("<U+001B>[2K<U+000D>")
    assert "\ufffd" in outcomes["srv_lone_surrogate"]["outputs"][0]


def test_the_shell_lines_that_read_reach_only_what_they_name(outcomes):
    lines = [json.loads(x) for x in (CORPUS / "shell_lines.jsonl").read_text().splitlines() if x.strip()]
    assert len(lines) == 20
    reads = [ln["id"] for ln in lines if outcomes[ln["id"]]["risk"] == "read-only"]
    assert sorted(reads) == ["sh_brace_ports", "sh_kubelet_read"]  # a GET of the kubelet's pods, a GET of models
    assert outcomes["sh_brace_ports"]["canaries"] == []  # 2375, written inside a brace expansion, is not relayed
    for line in lines:
        assert outcomes[line["id"]]["paths"] == [], outcomes[line["id"]]
