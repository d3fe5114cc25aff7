"""Ansible inventories, read as Ansible reads them, turned into the host entries sessions use.

Both of Ansible's static formats: INI (`[group]`, `[group:vars]`, `[group:children]`, hosts before
any section in `ungrouped`, `name key=value ...` lines, host ranges `gpu[01:32]`) and YAML (`all:` /
`hosts:` / `vars:` / `children:`). A host's variables are merged as Ansible merges them: `all`'s
first, then each group's from the shallowest to the deepest (children override parents), the host's
own last.

What a host entry takes from the variables: `ansible_host`, `ansible_user`, `ansible_port`,
`ansible_ssh_private_key_file` (the SSH target, on top of ~/.ssh/config as `ssh` reads it),
`ansible_connection: local`. Variables of our own, which Ansible ignores: `agent_transport: sim`
with `agent_sim: {...}` (a simulated GPU host, as in goal files), `agent_python` (the interpreter of
interest), `agent_path_prefix`. Written with our own small parser: the formats are small and fixed,
and Ansible itself is a large install that would bring its own module loader for two file formats. Every
other source (ec2, Kubernetes, NetBox: Ansible's inventory plugins) comes in as the JSON that
`ansible-inventory -i SOURCE --list` prints, with its hosts' variables as Ansible merged them. `--limit`
patterns: agent/fleet/patterns.py.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.goal import HOST_NAME, TOO_DEEP, HostEntry, TooManyValues, plain_values
from agent.input_files import InputFileError, read_text_file

MAX_INVENTORY_BYTES = 4 * 1024 * 1024
MAX_HOSTS = 10_000  # ranges included: `gpu[0:99999]` is a typo, not a fleet
MAX_INVENTORY_VALUES = 1_000_000  # what the YAML expands to: 10,000 hosts with their variables, and room
# A host's name names its transcript file too: letters, digits, `._:-`, not starting with a dot.
ADDRESS = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|[0-9A-Fa-f:.]+)$")  # a DNS name, IPv4 or IPv6
USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
PROGRAM = re.compile(r"^[A-Za-z0-9._/+-]{1,4096}$")  # a path or a program's name, nothing a shell reads


class InventoryError(ValueError):
    """What is wrong with an inventory, with its file and line where there is one."""


@dataclass
class Group:
    name: str
    hosts: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class Inventory:
    path: Path
    groups: dict[str, Group]
    host_vars: dict[str, dict[str, Any]]  # every host, in the order the file names them
    _memo: tuple | None = field(default=None, repr=False, compare=False)

    def hosts(self) -> list[str]:
        return list(self.host_vars)

    def groups_of(self, host: str) -> list[str]:
        """The groups `host` is in, directly or through children, `all` first, then by depth."""
        if self._memo is None:  # each group's members and depth once, not once a host: 10,000 hosts load in a second
            self._memo = ({g: self._members(g) for g in self.groups}, self._depths())
        members, depth = self._memo
        mine = {g for g in self.groups if host in members[g]}
        return sorted(mine, key=lambda g: (depth.get(g, 0), g))

    def vars_of(self, host: str) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for g in self.groups_of(host):
            merged.update(self.groups[g].vars)
        merged.update(self.host_vars[host])
        return merged

    def select(self, limit: str | None) -> list[str]:
        """The hosts a `--limit` pattern names, as ansible-playbook reads it (agent/fleet/patterns.py), in the
        order of `all` (the canary is the first of them); every host without one."""
        from agent.fleet.patterns import PatternError, group_hosts, select  # lazy: with the command

        try:
            everyone = group_hosts(self, "all")
            chosen = set(select(self, limit)) if limit else None
            out = everyone if chosen is None else [h for h in everyone if h in chosen]  # ansible-playbook's order
        except PatternError as e:
            raise InventoryError(f"{self.path}: {e}") from None
        if not out:
            raise InventoryError(f"{self.path}: --limit {limit!r} leaves no host (groups: "
                                 f"{', '.join(sorted(self.groups))})")
        return out

    def _members(self, group: str, seen: frozenset = frozenset()) -> set[str]:
        if group == "all":
            return set(self.host_vars)
        g = self.groups.get(group)
        if g is None or group in seen:
            return set()
        out = set(g.hosts)
        for child in g.children:
            out |= self._members(child, seen | {group})
        return out

    def _depths(self) -> dict[str, int]:
        depth = {"all": 0}
        frontier = [g for g in self.groups if g != "all" and not any(g in p.children for p in self.groups.values())]
        for g in frontier:
            depth[g] = 1
        while frontier:
            nxt = []
            for g in frontier:
                for child in self.groups[g].children:
                    if child in self.groups and depth.get(child, 0) < depth[g] + 1 and depth[g] < len(self.groups):
                        depth[child] = depth[g] + 1
                        nxt.append(child)
            frontier = nxt
        return depth

    def entries(self, names: list[str] | None = None) -> list[HostEntry]:
        """The hosts (all, or those named) as goal-file host entries."""
        return [host_entry(self.path, name, self.vars_of(name)) for name in (names or self.hosts())]


def load_inventory(path: Path) -> Inventory:
    try:
        text = read_text_file(path, MAX_INVENTORY_BYTES, "inventory")
    except InputFileError as e:
        raise InventoryError(str(e)) from None
    if path.suffix in (".yml", ".yaml", ".json"):
        inv = _parse_yaml(path, text)
    elif path.suffix in (".ini", ".cfg") or not _reads_as_yaml_groups(text):
        inv = _parse_ini(path, text)  # as Ansible: a file without a telling suffix is INI unless it is YAML
    else:
        inv = _parse_yaml(path, text)
    if not inv.host_vars:
        raise InventoryError(f"{path}: the inventory names no host")
    inv.entries()  # every host's variables must make a host entry: said now, before anything runs
    return inv


def _reads_as_yaml_groups(text: str) -> bool:
    try:
        data = _yaml_load(text)
    except Exception:  # noqa: BLE001 - not YAML: INI
        return False
    return isinstance(data, dict) and all(v is None or isinstance(v, dict) for v in data.values())


# --------------------------------------------------------------------------- INI


def _parse_ini(path: Path, text: str) -> Inventory:
    """As ansible-core's INI plugin: a group is defined by its `[g]` (or `[g:hosts]`) or `[g:children]` section; a
    `[g:children]` line may name a group defined further down (it is attached there, in that order), but not one
    never defined, and `[g:vars]` is only for a defined group."""
    groups: dict[str, Group] = {"all": Group("all"), "ungrouped": Group("ungrouped")}
    host_vars: dict[str, dict[str, Any]] = {}
    pending: dict[str, list[tuple[str, str]]] = {}  # a child not defined yet -> [(its parent, where it was named)]
    group_vars: dict[str, tuple[str, dict[str, Any]]] = {}  # group -> (where its first vars section is, its vars)
    section, kind = "ungrouped", "hosts"

    def define(name: str) -> None:
        if name not in groups:
            groups[name] = Group(name)
        for parent, _ in pending.pop(name, []):
            if name not in groups[parent].children:
                groups[parent].children.append(name)

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        where = f"{path}:{lineno}"
        if line.startswith("["):
            m = re.fullmatch(r"\[([^\]:\s]+)(?::(vars|children|hosts))?\]", line)
            if not m:
                raise InventoryError(f"{where}: {line!r} is not a section header; write [group], [group:vars] or "
                                     "[group:children]")
            section, kind = m.group(1), {None: "hosts"}.get(m.group(2), m.group(2))
            if kind == "vars":
                group_vars.setdefault(section, (where, {}))
            else:
                define(section)
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq or not key.strip():
                raise InventoryError(f"{where}: a [{section}:vars] line is key=value, got {line!r}")
            value = value.strip()
            if not value.startswith(("'", '"')):
                value = re.sub(r"\s+#.*$", "", value)  # an inline comment, as Ansible reads one
            group_vars[section][1][key.strip()] = _ini_value(value, literal=False)
        elif kind == "children":
            if not re.fullmatch(r"[\w.-]+", line):
                raise InventoryError(f"{where}: a [{section}:children] line names one group, got {line!r}")
            if line in groups:
                if line not in groups[section].children:
                    groups[section].children.append(line)
            else:
                pending.setdefault(line, []).append((section, where))
        else:
            name, *pairs = _split_host_line(where, line)
            values = {}
            for pair in pairs:
                key, eq, value = pair.partition("=")
                if not eq or not key:
                    raise InventoryError(f"{where}: host variables are key=value, got {pair!r}")
                values[key] = _ini_value(value, literal=True)
            if name.endswith(":"):
                raise InventoryError(f"{where}: host {name!r} ends in a colon with no port after it")
            name, port = host_and_port(name)
            if port is not None:
                values = {"ansible_port": port, **values}  # a port written as a variable wins, as in Ansible
            for host in expand_range(where, name):
                host_vars.setdefault(host, {}).update(values)
                if host not in groups[section].hosts:
                    groups[section].hosts.append(host)
                if len(host_vars) > MAX_HOSTS:
                    raise InventoryError(f"{where}: more than {MAX_HOSTS:,} hosts")
    for child, named in pending.items():
        parent, where = named[0]
        raise InventoryError(f"{where}: [{parent}:children] names {child!r}, a group defined nowhere in the file "
                             f"(a host's name does not make a group: put it in a [{child}] section)")
    for group, (where, values) in group_vars.items():
        if group not in groups:
            raise InventoryError(f"{where}: [{group}:vars] is for a group the file never defines: add a [{group}] "
                                 "section, or fix the name")
        groups[group].vars.update(values)
    for name in groups:
        _no_cycle(path, groups, name, ())
    return Inventory(path, groups, host_vars)


def _no_cycle(path: Path, groups: dict[str, Group], name: str, trail: tuple[str, ...]) -> None:
    if name in trail:
        raise InventoryError(f"{path}: group {name!r} is its own child ({' > '.join((*trail, name))})")
    for child in groups[name].children if name in groups else ():
        _no_cycle(path, groups, child, (*trail, name))


def _split_host_line(where: str, line: str) -> list[str]:
    import shlex

    try:
        return shlex.split(line, comments=True)
    except ValueError as e:
        raise InventoryError(f"{where}: cannot read the host line: {e}") from None


def _ini_value(value: str, literal: bool) -> Any:
    """Host-line values are Python literals where they parse as one (as Ansible reads them); others are text.
    A value that reads as YAML flow (`{driver: 550.1}`) is read so, for `agent_sim`."""
    if literal:
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
    if value.startswith(("{", "[")):
        try:
            return _yaml_load(value)
        except Exception:  # noqa: BLE001 - left as text; the entry's validation says what is wrong
            return value
    return value


def host_and_port(pattern: str) -> tuple[str, int | None]:
    """`gpu01:2222` is host gpu01 on port 2222, as Ansible reads a host with a port (a range's colon, inside its
    brackets, and an IPv6 address are not a port)."""
    m = re.fullmatch(r"((?:[^:\[\]]|\[[^\]]*\])+):(\d{1,5})", pattern)
    return (m.group(1), int(m.group(2))) if m else (pattern, None)


def expand_range(where: str, pattern: str) -> list[str]:
    """`gpu[01:04]` -> gpu01..gpu04 (leading zeros kept), `n[a:c]` -> na..nc, `[1:9:2]` with a step."""
    m = re.search(r"\[([0-9a-z]+):([0-9a-z]+)(?::(\d+))?\]", pattern)
    if not m:
        return [pattern]
    start, end, step = m.group(1), m.group(2), int(m.group(3) or 1)
    head, tail = pattern[:m.start()], pattern[m.end():]
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1, step)]
    elif len(start) == len(end) == 1 and start.isalpha() and end.isalpha():
        values = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    else:
        raise InventoryError(f"{where}: cannot expand the range [{start}:{end}] in {pattern!r}")
    if not values or len(values) > MAX_HOSTS:
        raise InventoryError(f"{where}: the range in {pattern!r} gives {len(values)} hosts")
    return [h for v in values for h in expand_range(where, head + v + tail)]


# --------------------------------------------------------------------------- YAML


def _yaml_load(text: str) -> Any:
    from ruamel.yaml import YAML  # lazy: as goal files

    return YAML(typ="safe", pure=True).load(text)


def _parse_yaml(path: Path, text: str) -> Inventory:
    from ruamel.yaml.error import YAMLError

    try:
        data = _yaml_load(text)
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise InventoryError(f"{path}{line}: not valid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:  # the YAML reader recurses once per level
        raise InventoryError(f"{path}: {TOO_DEEP}") from None
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: a YAML inventory is a mapping of groups (usually `all:`)")
    try:  # as goal files: a few lines of aliases can expand into billions of values
        data = plain_values(data, [MAX_INVENTORY_VALUES])
    except TooManyValues:
        raise InventoryError(f"{path}: the file expands to more than {MAX_INVENTORY_VALUES:,} values (YAML aliases "
                             "`*name` that repeat anchors): write the values out, or use fewer aliases") from None
    if "_meta" in data:
        return _parse_inventory_list(path, data)
    groups: dict[str, Group] = {"all": Group("all"), "ungrouped": Group("ungrouped")}
    host_vars: dict[str, dict[str, Any]] = {}

    def walk(name: str, body: Any, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise InventoryError(f"{path}: group {name!r} is its own child ({' > '.join((*trail, name))})")
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise InventoryError(f"{path}: group {name!r} must be a mapping with hosts:, vars:, children:")
        unknown = set(body) - {"hosts", "vars", "children"}
        if unknown:
            raise InventoryError(f"{path}: group {name!r} has {', '.join(sorted(map(str, unknown)))}; a group has "
                                 "only hosts:, vars: and children:")
        body = dict(body)
        for key in ("hosts", "children"):
            if isinstance(body.get(key), str):  # one name, as ansible-core reads it
                body[key] = {body[key]: None}
            elif body.get(key) is not None and not isinstance(body[key], dict):
                kind = "a list" if isinstance(body[key], list) else f"a {type(body[key]).__name__}"
                raise InventoryError(f"{path}: {key}: of group {name!r} is {kind}; Ansible's YAML inventory writes "
                                     f"it as a mapping, each name followed by a colon (`{key}:` / `  gpu01:`)")
        g = groups.setdefault(name, Group(name))
        for pattern in body.get("hosts") or {}:
            number = re.fullmatch(r"[-+]?(?:[0-9]+|[0-9]*\.[0-9]+)", str(pattern))
            if number or str(pattern).lower() in _YAML11_BOOLS:
                raise InventoryError(f"{path}: host {str(pattern)!r} in group {name!r}: Ansible's YAML reader takes it "
                                     f"for a {'number' if number else 'boolean'}, not a name; give the host another "
                                     "name and its address as ansible_host")
        for pattern, values in (body.get("hosts") or {}).items():
            if values is not None and not isinstance(values, dict):
                raise InventoryError(f"{path}: host {pattern!r} in group {name!r}: its variables must be a mapping")
            pattern, port = host_and_port(str(pattern))
            values = {**({"ansible_port": port} if port is not None else {}), **(values or {})}
            for host in expand_range(str(path), pattern):
                host_vars.setdefault(host, {}).update(values)
                if host not in g.hosts:
                    g.hosts.append(host)
        if not isinstance(body.get("vars") or {}, dict):
            raise InventoryError(f"{path}: vars of group {name!r} must be a mapping")
        g.vars.update(body.get("vars") or {})
        for child, child_body in (body.get("children") or {}).items():
            if child not in g.children:
                g.children.append(str(child))
            walk(str(child), child_body, (*trail, name))

    for name, body in data.items():
        walk(str(name), body, ())
    for name in groups:  # a cycle can also be made of edges from different places of the file
        _no_cycle(path, groups, name, ())
    if len(host_vars) > MAX_HOSTS:
        raise InventoryError(f"{path}: more than {MAX_HOSTS:,} hosts")
    return Inventory(path, groups, host_vars)


# What YAML 1.1 (Ansible's reader) takes for a boolean where a host name stands unquoted.
_YAML11_BOOLS = {"y", "yes", "n", "no", "true", "false", "on", "off"}


def _parse_inventory_list(path: Path, data: dict) -> Inventory:
    """What `ansible-inventory -i SOURCE --list` prints: every group with its `hosts` and `children` as lists,
    every host's variables under `_meta.hostvars` (already merged by Ansible's own inventory plugins: an ec2,
    Kubernetes or NetBox inventory reaches agent fleet through it)."""
    meta = data.get("_meta")
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    if not isinstance(hostvars, dict):
        raise InventoryError(f"{path}: `_meta` has no `hostvars` mapping: give the output of "
                             "`ansible-inventory -i SOURCE --list` as it is")
    groups: dict[str, Group] = {"all": Group("all"), "ungrouped": Group("ungrouped")}
    host_vars: dict[str, dict[str, Any]] = {}
    for name, body in data.items():
        if name == "_meta":
            continue
        if isinstance(body, list):  # a group as the list of its hosts: the older dynamic-inventory form
            body = {"hosts": body}
        if not isinstance(body, dict) or any(not isinstance(body.get(k) or [], list) for k in ("hosts", "children")):
            raise InventoryError(f"{path}: group {name!r} is not as `ansible-inventory --list` writes one "
                                 "(hosts: [...], children: [...])")
        g = groups.setdefault(str(name), Group(str(name)))
        for child in body.get("children") or []:
            groups.setdefault(str(child), Group(str(child)))
            if str(child) not in g.children:
                g.children.append(str(child))
        for host in body.get("hosts") or []:
            values = hostvars.get(host) or {}
            if not isinstance(values, dict):
                raise InventoryError(f"{path}: the variables of host {host!r} are not a mapping")
            host_vars.setdefault(str(host), dict(values))  # merged by Ansible already: the group's vars are in it
            if str(host) not in g.hosts:
                g.hosts.append(str(host))
    for name in groups:
        _no_cycle(path, groups, name, ())
    if len(host_vars) > MAX_HOSTS:
        raise InventoryError(f"{path}: more than {MAX_HOSTS:,} hosts")
    return Inventory(path, groups, host_vars)


# --------------------------------------------------------------------------- host entries

# Ours, which Ansible ignores; any other `agent_` variable is a typo (`agent_trasport`) that would silently make a
# simulated host an SSH one.
AGENT_VARS = ("agent_transport", "agent_sim", "agent_python", "agent_path_prefix",
              "agent_sim_root")  # the last: for ansible-playbook's upgrade_agent_sim connection; agent fleet builds its own
# Ansible's connection variables we honour, each with the names its ssh connection reads for it, the one that wins
# first: `ansible_ssh_host` set for a group beats `ansible_host` set for the host, as ansible-playbook runs it.
CONNECTION_NAMES = {"ansible_host": ("ansible_ssh_host", "ansible_host"),
                    "ansible_port": ("ansible_ssh_port", "ansible_port"),
                    "ansible_user": ("ansible_ssh_user", "ansible_user"),
                    "ansible_ssh_private_key_file": ("ansible_ssh_private_key_file", "ansible_private_key_file")}
HONOURED = ("ansible_connection", *(n for names in CONNECTION_NAMES.values() for n in names))
# Why an Ansible variable we do not honour makes no difference to us, or what to do instead.
_NOT_HONOURED_HINT = [
    (re.compile(r"ansible_(become|sudo|su)\b.*"), "commands run as the SSH user, with `sudo -n` where a step needs "
                                                 "root: give a user with a NOPASSWD sudo rule"),
    (re.compile(r"ansible_(ssh_)?pass(word)?|ansible_.*_pass(word)?"), "agent fleet logs in by key only (ssh-agent or "
                                                                       "ansible_ssh_private_key_file) and never "
                                                                       "types a password"),
    (re.compile(r"ansible_ssh_(common|extra)_args|ansible_ssh_args|ansible_s(ftp|cp)_extra_args"),
     "its options are not passed on: put ProxyJump and other options in ~/.ssh/config, which agent fleet reads"),
    (re.compile(r"ansible_(ssh_)?host_key_checking"), "host keys are always checked (--trust-host-key for a new one)"),
]


def inventory_warnings(inv: "Inventory", names: list[str]) -> list[str]:
    """One line per Ansible variable the chosen hosts set that agent fleet does not honour: what it is ignored
    for, and what to do instead. Said before anything runs, never silently."""
    hosts_by_var: dict[str, list[str]] = {}
    for name in names:
        for key in inv.vars_of(name):
            if isinstance(key, str) and key.startswith("ansible_") and key not in HONOURED:
                hosts_by_var.setdefault(key, []).append(name)
    out = []
    for key, hosts in sorted(hosts_by_var.items()):
        hint = next((h for pattern, h in _NOT_HONOURED_HINT if pattern.fullmatch(key)),
                    "agent fleet does not read it")
        who = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
        out.append(f"{inv.path}: {key} (set for {who}) is not honoured: {hint}")
    return out


def _check_connection(path: Path, name: str, v: dict[str, Any]) -> None:
    """What becomes a file name, an SSH address, a user or a port is what it says and nothing more."""
    if not HOST_NAME.fullmatch(name) or "@" in name or ".." in name:
        raise InventoryError(f"{path}: host {name!r}: a host name is letters, digits and ._:- (it also names the "
                             "host's transcript file); give the address as ansible_host")
    if re.fullmatch(r"fleet(-\d+)?", name):
        raise InventoryError(f"{path}: a host cannot be named {name!r}: {name}.jsonl is the rollout's own record; name "
                             "it otherwise and give its address as ansible_host")
    if name == "all":
        raise InventoryError(f"{path}: a host cannot be named `all`: that is the group of every host; name it "
                             "otherwise and give its address as ansible_host")
    checks = (("ansible_host", ADDRESS, "a host name or an IP address"), ("ansible_user", USER, "a user name"))
    for key, pattern, what in checks:
        if key in v and not (isinstance(v[key], str) and pattern.match(v[key])):
            raise InventoryError(f"{path}: host {name}: {key} {v[key]!r} is not {what}")
    port = v.get("ansible_port")
    if port is not None and not (str(port).isdigit() and 1 <= int(port) <= 65535):
        raise InventoryError(f"{path}: host {name}: ansible_port {port!r} is not a port number (1 to 65535)")
    key = v.get("ansible_ssh_private_key_file")
    if key is not None and (not isinstance(key, str) or not key.strip() or any(c in key for c in "\n\r\0")):
        raise InventoryError(f"{path}: host {name}: ansible_ssh_private_key_file {key!r} is not a file path")
    transport = v.get("agent_transport")
    if transport is not None and transport not in ("ssh", "local", "sim"):
        raise InventoryError(f"{path}: host {name}: agent_transport {transport!r} is not ssh, local or sim")
    connection = v.get("ansible_connection")
    if connection not in (None, "ssh", "paramiko", "smart", "local"):
        raise InventoryError(f"{path}: host {name}: ansible_connection {connection!r} is not one agent fleet speaks "
                             "(ssh, local)")
    if transport == "sim" and connection not in (None, "ssh", "local") or (transport in ("sim", "ssh") and
                                                                            connection == "local"):
        raise InventoryError(f"{path}: host {name}: agent_transport {transport} and ansible_connection {connection} "
                             "say different things; keep one")
    python = v.get("agent_python")
    if python is not None and not (isinstance(python, str) and PROGRAM.match(python)):
        raise InventoryError(f"{path}: host {name}: agent_python {python!r} is not an interpreter's path or name")
    prefix = v.get("agent_path_prefix")
    for d in [prefix] if isinstance(prefix, str) else (prefix or []):
        if not (isinstance(d, str) and d.startswith("/") and PROGRAM.match(d)):
            raise InventoryError(f"{path}: host {name}: agent_path_prefix {d!r} is not an absolute directory")


def host_entry(path: Path, name: str, v: dict[str, Any]) -> HostEntry:
    """One inventory host as a goal-file host entry."""
    from pydantic import ValidationError

    for key in v:
        if isinstance(key, str) and key.startswith("agent_") and key not in AGENT_VARS:
            raise InventoryError(f"{path}: host {name}: {key} is not a variable of agent fleet (its own are "
                                 f"{', '.join(AGENT_VARS)}): a typo?")
    v = dict(v)
    for variable, read_as in CONNECTION_NAMES.items():  # the name Ansible's ssh connection heeds, at any level
        found = next((n for n in read_as if n in v), None)
        if found is not None:
            v[variable] = v[found]
    _check_connection(path, name, v)
    transport = str(v.get("agent_transport") or ("local" if v.get("ansible_connection") == "local" else "ssh"))
    fields: dict[str, Any] = {"name": name, "transport": transport}
    if transport == "ssh":
        address = str(v.get("ansible_host") or name)
        host = f"[{address}]" if ":" in address and v.get("ansible_port") else address
        user = v.get("ansible_user")
        port = v.get("ansible_port")
        fields["target"] = f"{user + '@' if user else ''}{host}{':' + str(port) if port else ''}"
        if v.get("ansible_ssh_private_key_file"):
            fields["identity_file"] = str(Path(str(v["ansible_ssh_private_key_file"])).expanduser())
    if transport == "sim" and v.get("agent_sim") is not None:
        fields["sim"] = v["agent_sim"]
    if v.get("agent_python"):
        fields["python"] = str(v["agent_python"])
    if v.get("agent_path_prefix"):
        prefix = v["agent_path_prefix"]
        fields["path_prefix"] = [prefix] if isinstance(prefix, str) else list(prefix)
    try:
        return HostEntry.model_validate(fields)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InventoryError(f"{path}: host {name}: {where}: {first['msg']}") from None
