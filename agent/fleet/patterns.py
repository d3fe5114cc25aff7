"""Ansible's host patterns (`--limit`), as ansible-core's inventory manager evaluates them.

What a pattern means here is what it means to `ansible-playbook --limit`, so that an operator's habits carry
over: `a,b` or `a:b` (a union; the colon is not read inside `[...]`), `&g` (only those also in g), `!g` (leave
out g; a pattern of only `!` and `&` terms starts from `all`), `*` and `all`, shell wildcards (`gpu0*`,
`gpu?1`) and regular expressions (`~gpu0[12]`, matched from the start of the name) against group and host
names, subscripts of what a term matched (`gpu[0]`, `gpu[-1]`, `gpu[1:2]` with the end included, `gpu[1:]`;
`gpu[:1]` is no subscript to ansible-core, and matches nothing), and `@FILE`, a retry file of host names, one
a line. Terms are taken unions first, then `&`, then `!`, whatever their order in the pattern. A group's hosts
come in Ansible's order: its own, then its children's, level by level (ansible-core orders the groups of one
level as a set does, which changes from run to run past the first level; we keep the file's order there). As
`ansible-playbook --limit`, a rollout takes the hosts the pattern selects in the order of `all`, whatever the
pattern's order. tests/agent/test_fleet_patterns_vs_ansible.py holds this against ansible-core itself.

Where Ansible warns and goes on (a term that matches nothing), we stop with one line: a rollout over fewer
hosts than the operator meant is worse than no rollout.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any, Protocol


class Inventory(Protocol):
    """What a pattern is read against (agent/fleet/inventory.py's Inventory, which imports this module)."""

    groups: dict[str, Any]  # name -> its Group (hosts, children), in the order the file made them
    host_vars: dict[str, dict[str, Any]]  # every host, in the order the file names them

# ansible-core's own: `[0]`, `[-1]`, `[1:2]`, `[1:]` (and `[1-2]`, which it still reads, with a warning); not `[:2]`
_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)[:-]([0-9]*))\]$")
MAX_RETRY_FILE_BYTES = 1024 * 1024


class PatternError(ValueError):
    """What is wrong with a host pattern, in one line."""


# What ansible-core keeps whole when a pattern has no comma: an address with a port (`gpu01:2222`), an IPv6 one.
_ADDRESS = re.compile(r"[A-Za-z0-9_.-]+(?:\[[0-9a-z:]+\][A-Za-z0-9_.-]*)?:[0-9]+|(?=.*::)[0-9A-Fa-f:]+"
                      r"|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}")


def split_pattern(pattern: str) -> list[str]:
    """The terms of a pattern, split as ansible-core splits them: on `,` where there is one (a `:` is then part
    of a term); else the whole, where it reads as an address; else on `:` and whitespace outside brackets."""
    if "," in pattern:
        return [t.strip() for t in pattern.split(",") if t.strip()]
    if _ADDRESS.fullmatch(pattern.strip()):
        return [pattern.strip()]
    return [t for t in re.findall(r"(?:[^\s:\[\]]|\[[^\]]*\])+", pattern) if t.strip()]


def select(inv: Inventory, pattern: str) -> list[str]:
    """The hosts `pattern` names, in the pattern's order (as `ansible PATTERN --list-hosts` lists them)."""
    terms: list[tuple[str, str]] = []  # (term, how to name it in a message)
    for t in split_pattern(pattern):
        if t.startswith("@"):  # a retry file: its lines are terms of the pattern, in its place
            terms += [(line, f"a line of {t}") for line in _retry_file(t[1:], t)]
        else:
            terms.append((t, repr(t)))
    if not terms:
        raise PatternError(f"--limit {pattern!r} names no group or host")
    unions = [t for t in terms if t[0][0] not in "!&"]
    ordered = (unions or [("all", "'all'")]) + [t for t in terms if t[0][0] == "&"] + \
        [t for t in terms if t[0][0] == "!"]
    hosts: dict[str, None] = {}  # ordered, each once (10,000 hosts: no list scans)
    for term, said in ordered:
        kind = term[0] if term[0] in "!&" else ""
        if not kind and term in inv.host_vars:  # a plain host name is that host, though a group has its name
            hosts[term] = None
            continue
        matched = _one_term(inv, term[1:] if kind else term, said)
        if kind == "!":
            gone = set(matched)
            hosts = {h: None for h in hosts if h not in gone}
        elif kind == "&":
            kept = set(matched)
            hosts = {h: None for h in hosts if h in kept}
        else:
            hosts.update(dict.fromkeys(matched))
    return list(hosts)


def _one_term(inv: Inventory, expr: str, said: str) -> list[str]:
    if not expr:
        raise PatternError(f"--limit term {said} names nothing after its ! or &")
    subscript = None
    if not expr.startswith("~"):
        m = _SUBSCRIPT.match(expr)
        if m:
            expr, index, start, end = m.groups()
            # As ansible-core reads it, an end of 0 included: `g[1:0]` is `g[1]`.
            subscript = (int(index), None) if index else (int(start), int(end) if end else -1)
            if subscript[1] == 0:
                subscript = (subscript[0], None)
    hosts = _matches(inv, expr, said)
    if subscript is None:
        return hosts
    start, end = subscript
    if end is None:
        if not -len(hosts) <= start < len(hosts):
            raise PatternError(f"--limit {said}: {expr} has {len(hosts)} host{'s' * (len(hosts) != 1)}, so there "
                               f"is no [{start}] (the first is [0])")
        return [hosts[start]]
    end = len(hosts) - 1 if end == -1 else end
    picked = hosts[start:end + 1]  # Ansible's slices include their end
    if not picked:
        raise PatternError(f"--limit {said}: {expr} has {len(hosts)} host{'s' * (len(hosts) != 1)}, none in "
                           f"[{start}:{end}]")
    return picked


def _matches(inv: Inventory, expr: str, said: str) -> list[str]:
    """A term's hosts: the groups it matches (each group's hosts in Ansible's order), then, where no group matched
    or the term is a wildcard or a regular expression, the hosts it matches. A group without hosts is a match."""
    try:
        regex = re.compile(expr[1:] if expr.startswith("~") else fnmatch.translate(expr))
    except re.error as e:
        raise PatternError(f"--limit {said} is not a valid pattern: {e}") from None
    groups = [g for g in inv.groups if regex.match(g)]
    found: dict[str, None] = {}
    for g in groups:
        found.update(dict.fromkeys(group_hosts(inv, g)))
    if not groups or expr.startswith("~") or any(c in expr for c in ".?*["):
        found.update(dict.fromkeys(h for h in inv.host_vars if regex.match(h)))
    if not found and not groups:
        raise PatternError(f"--limit names {said}, which is neither a group nor a host of the inventory (groups: "
                           f"{', '.join(sorted(inv.groups))})")
    return list(found)


def _retry_file(name: str, term: str) -> list[str]:
    """The lines of a retry file, each a term of the pattern (as ansible-core reads `@FILE`). A line that matches
    nothing is named by its place, not its text: the file may be anything (`@/etc/passwd`)."""
    from agent.input_files import InputFileError, read_text_file  # lazy: a retry file is rare

    try:
        text = read_text_file(Path(name).expanduser(), MAX_RETRY_FILE_BYTES, "retry file")
    except InputFileError as e:
        raise PatternError(f"--limit {term!r}: {e}") from None
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if not lines:
        raise PatternError(f"--limit {term!r}: the retry file names no host")
    return lines


def children(inv: Inventory, name: str) -> list[str]:
    """A group's child groups; `all`'s are `ungrouped`, those the file put under it, then every group without a
    parent, in the order the file made them (as Ansible reconciles an inventory)."""
    listed = [c for c in inv.groups[name].children if c in inv.groups] if name in inv.groups else []
    if name != "all":
        return listed
    parented = {c for g, grp in inv.groups.items() if g != "all" for c in grp.children}
    top = [g for g in inv.groups if g not in ("all", "ungrouped") and g not in parented]
    return list(dict.fromkeys(["ungrouped", *listed, *top]))


def group_hosts(inv: Inventory, name: str) -> list[str]:
    """A group's hosts in Ansible's order: its own, then its children's, level by level, each once. `ungrouped`
    holds only the hosts no other group (but `all`) holds."""
    order, seen, frontier = [name], {name}, [name]
    while frontier:
        nxt = []
        for g in frontier:
            for child in children(inv, g):
                if child not in seen:
                    seen.add(child)
                    order.append(child)
                    nxt.append(child)
        frontier = nxt
    grouped = {h for g, grp in inv.groups.items() if g not in ("all", "ungrouped") for h in grp.hosts}
    out: dict[str, None] = {}
    for g in order:
        if g == "all":
            out.update(dict.fromkeys(inv.groups["all"].hosts))
        elif g == "ungrouped":
            out.update(dict.fromkeys(h for h in inv.groups["ungrouped"].hosts + inv.groups["all"].hosts
                                     if h not in grouped))
        else:
            out.update(dict.fromkeys(inv.groups[g].hosts))
    if name == "all":  # a host no group lists (cannot happen from a file; kept so none is ever lost)
        out.update(dict.fromkeys(inv.host_vars))
    return list(out)
