"""The command classifier: the risk class of a shell command, read from a real bash parse.

`classify(command)` is what the gate asks of every ssh_exec command; `classify_workload` is the
stricter reading for a benchmark's command line. The rules live in `rules.py`.
"""

from agent.safety.classifier.rules import classify, classify_workload

__all__ = ["classify", "classify_workload"]
