"""The safety layer: the gate every tool call passes, the backup ledger, and the command classifier.

    policy.py      SafetyPolicy.decide: the only place that says yes or no (its docstring lists the rules)
    ledger.py      the verified backups of this session, per host
    classifier/    the risk class of a shell command, from a real bash parse

Nothing is imported here, so `agent classify` loads the classifier without the gate.
"""
