"""The safety layer: the gate every tool call passes, the backup ledger, and the command classifier.

The gate (`policy.SafetyPolicy.decide`) is the only place that says yes or no; see policy.py for
the order of its rules.
"""

from agent.safety.ledger import BackupLedger
from agent.safety.policy import (
                                 ApprovalAnswer,
                                 ApprovalRequest,
                                 Approver,
                                 Authorization,
                                 Decision,
                                 SafetyPolicy,
                                 Verdict,
                                 classify_action,
)

__all__ = ["ApprovalAnswer", "ApprovalRequest", "Approver", "Authorization", "BackupLedger", "Decision",
           "SafetyPolicy", "Verdict", "classify_action"]
