"""The work budget of one command's analysis: units of work (a parsed KiB, a visited node, a
command judged) spent against a bound, so a command too complex to judge is refused instead of slow."""

from __future__ import annotations

from tree_sitter import Node

from agent.safety.classifier.tree import parse_bash


# The budget is set so that the worst inputs stay well under 100 ms (benchmarks/classifier_cost.py);
# the longest commands of the corpora and recorded sessions spend under a sixth of it.
_MAX_TEXT = 16 * 1024  # bytes of command text, before anything is parsed
_MAX_WORK = 600


class _TooComplex(Exception):
    pass


_TOO_COMPLEX = ("the command is too {what} to judge in bounded time, so it is refused: split it into "
                "smaller commands, or copy large files with a tool instead of inline text")


class _WorkBudget:
    """The work a command's analysis spends (self.work, shared by its nested contexts); a part of `_Analysis`
    (analysis.py), whose state and other parts it reaches through self."""

    def spend(self, units: int = 1) -> None:
        self.work[0] += units
        if self.work[0] > _MAX_WORK:
            raise _TooComplex

    def parse(self, data: bytes) -> Node:
        self.spend(1 + len(data) // 256)
        tree = parse_bash(data)
        self.trees.append(tree)
        return tree.root_node
