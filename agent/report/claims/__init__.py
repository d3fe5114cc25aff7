"""The model's final answer, checked against the record.

The final answer is the model's words; the transcript is what happened. `check_report(report)`
reads the answer with regular expressions for what it states that the record can speak to,
and compares each statement with the typed fields of the tool results, one module per kind:

    figures.py   "before 89.16, after 96.11 tok/s", "89.16 -> 96.11 tok/s"   run_bench's medians, by label,
                 "7.8% faster", "ratio 1.078", "1.08x faster"               unit and host; its comparisons
    versions.py  driver, the CUDA the driver supports, nvcc, the toolkit on   inspect_host, pip_install's
                 PATH, torch or any package the record knows (`torch==X`,     changes, the backups'
                 `torch X -> Y`, "torch is now X")                           freezes, the final state
    toolkits.py  "toolkit 13.0.1 installed", "CUDA 13.0 was NOT installed"    install_runfile, inspect_host
    steps.py     "restored", "upgrade done", "the cuda symlink unchanged",    restore_backup, the goal's
                 a backup id                                                  result, the backups

`answer.py` cuts the answer into sentences (a Markdown table's rows read with their header) and finds
the host each stretch of a sentence names; `record.py` holds the record's facts, for the whole run or
one host; `engine.py` puts them together. A sentence that names a host is checked against that host's
record only, and a figure against the recorded figure of its own unit: a latency in ms is never set
against a throughput in tok/s.

Each statement becomes a Finding that agrees with the record or differs from it, in plain
words ("the model says 96.02 tok/s after; measured 95.91 (median of 3 runs, turn 5, call 1)").
What the answer states that the record cannot speak to is left alone: a finding that is wrong
would teach the reader to ignore them all, so every pattern asks for the words that make a
statement checkable, and a package, label or toolkit the record never saw gives no finding.
Deterministic: the same transcript always gives the same findings, and no model is asked.

    check = check_claims(Path("session.jsonl"))
    check.differences, check.confirmed, check.lines()
"""

from agent.report.claims.engine import check_claims, check_report
from agent.report.claims.findings import ClaimCheck, Finding

__all__ = ["ClaimCheck", "Finding", "check_claims", "check_report"]
