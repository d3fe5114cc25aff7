"""Our inventory reader and `--limit` against ansible-core's own, on inventories and patterns hypothesis makes.

For each generated inventory (INI, or the YAML form of the same groups) and pattern, ansible-core's
InventoryManager does what `ansible-playbook -i INV --limit PATTERN` does (`subset(PATTERN)`, then the play's
`all`), and `Inventory.select` must give the same hosts. Where ansible-core's order is a set's (groups two
levels down, which move with the hash seed), the hosts are compared as a set, and the order of the first level
exactly. Where ansible-core warns that a term matches nothing and goes on, or raises, we refuse in one line.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ansible")  # the test extra installs ansible-core

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agent.fleet.inventory import InventoryError, load_inventory  # noqa: E402

HOSTS = [f"{p}{i:02d}" for p in ("gpu", "cpu", "node") for i in range(1, 5)]
GROUPS = ["gpu", "h200", "dc", "east", "west", "batch"]


@st.composite
def inventories(draw):
    """Groups with hosts and a child DAG (a child only of groups earlier in the list: no cycle)."""
    groups = draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=5, unique=True))
    members = {g: draw(st.lists(st.sampled_from(HOSTS), max_size=4, unique=True)) for g in groups}
    children = {g: draw(st.lists(st.sampled_from(groups[i + 1:]), max_size=2, unique=True)) if i + 1 < len(groups)
                else [] for i, g in enumerate(groups)}
    ungrouped = draw(st.lists(st.sampled_from([h for h in HOSTS if not any(h in m for m in members.values())]),
                              max_size=2, unique=True)) if any(h not in sum(members.values(), []) for h in HOSTS) \
        else []
    if not ungrouped and not any(members.values()):
        ungrouped = [HOSTS[0]]
    return groups, members, children, ungrouped


def ini_text(groups, members, children, ungrouped) -> str:
    lines = list(ungrouped)
    for g in groups:
        lines += [f"[{g}]", *members[g]]
        if children[g]:
            lines += [f"[{g}:children]", *children[g]]
    return "\n".join(lines + ["[all:vars]", "agent_transport=sim", ""])


def yaml_text(groups, members, children, ungrouped) -> str:
    def body(g, depth):
        pad = "  " * depth
        out = [f"{pad}{g}:"]
        if members[g]:
            out += [f"{pad}  hosts:"] + [f"{pad}    {h}:" for h in members[g]]
        if children[g]:
            out += [f"{pad}  children:"] + [line for c in children[g] for line in body(c, depth + 2)]
        return out

    parented = {c for cs in children.values() for c in cs}
    lines = ["all:", "  vars:", "    agent_transport: sim"]
    if ungrouped:
        lines += ["  hosts:"] + [f"    {h}:" for h in ungrouped]
    tops = [g for g in groups if g not in parented]
    if tops:
        lines += ["  children:"] + [line for g in tops for line in body(g, 2)]
    return "\n".join(lines) + "\n"


def term(names) -> st.SearchStrategy[str]:
    name = st.sampled_from(names)
    return st.one_of(
        name,
        name.map(lambda n: n[:3] + "*"),
        name.map(lambda n: "~" + n[:2] + ".*"),
        st.tuples(name, st.integers(-3, 4)).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(name, st.integers(0, 3), st.integers(0, 4)).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}]"),
        st.tuples(name, st.integers(0, 3)).map(lambda t: f"{t[0]}[{t[1]}:]"),
        st.just("all"), st.just("*"), st.just("?pu0*"),
    )


@st.composite
def cases(draw):
    inv = draw(inventories())
    present = [h for h in HOSTS if h in inv[3] or any(h in m for m in inv[1].values())]
    names = inv[0] + present + [draw(st.sampled_from(HOSTS))]  # mostly names the inventory has
    terms = draw(st.lists(st.tuples(st.sampled_from(["", "", "!", "&"]), term(names)), min_size=1, max_size=4))
    sep = draw(st.sampled_from([",", ":"]))
    if sep == ":" and any("[" in t and ":" in t for _, t in terms) and draw(st.booleans()):
        sep = ","
    return inv, sep.join(kind + t for kind, t in terms), draw(st.sampled_from(["ini", "yaml"]))


def ansible_hosts(path: Path, pattern: str) -> list[str] | None:
    """ansible-playbook's hosts for --limit PATTERN (`subset`, then the play's `all`); None where it raises."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    try:
        manager.subset(pattern)
        return [h.name for h in manager.get_hosts("all")]
    except AnsibleError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_limit_selects_the_hosts_ansible_playbook_would(case):
    (groups, members, children, ungrouped), pattern, form = case
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("hosts.ini" if form == "ini" else "hosts.yml")
        path.write_text(ini_text(groups, members, children, ungrouped) if form == "ini" else
                        yaml_text(groups, members, children, ungrouped))
        ours = load_inventory(path)
        theirs_all = ansible_hosts(path, "all")
        assert set(ours.select(None)) == set(theirs_all)
        theirs = ansible_hosts(path, pattern)
        try:
            mine = ours.select(pattern)
        except InventoryError as e:
            assert "\n" not in str(e)
            # refused: ansible-core matched nothing, or went on past a term that matched nothing
            assert not theirs or _a_term_matches_nothing(path, pattern), (pattern, theirs, str(e))
            return
        assert theirs is not None and set(mine) == set(theirs), (pattern, mine, theirs)
        first_level = [h for h in theirs if h in ungrouped or any(h in members[g] for g in groups
                                                                   if not any(g in cs for cs in children.values()))]
        assert [h for h in mine if h in first_level] == first_level, (pattern, mine, theirs)


def _a_term_matches_nothing(path: Path, pattern: str) -> bool:
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager, split_host_pattern
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    for t in split_host_pattern(pattern):
        try:
            if not manager._match_one_pattern(t.lstrip("!&")):
                return True
        except AnsibleError:
            return True
    return False


def test_the_generator_writes_inventories_ansible_reads():
    inv = (["gpu", "dc"], {"gpu": ["gpu01"], "dc": ["cpu01"]}, {"gpu": ["dc"], "dc": []}, ["node01"])
    for form, text in (("ini", ini_text(*inv)), ("yml", yaml_text(*inv))):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"hosts.{form}"
            path.write_text(text)
            assert sorted(ansible_hosts(path, "all")) == ["cpu01", "gpu01", "node01"]
            assert ansible_hosts(path, "gpu") == ["gpu01", "cpu01"]
