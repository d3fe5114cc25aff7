"""The hosts a call names, read before its arguments are validated.

The scope comes before the arguments' details: a call naming a host outside the session is refused as
such, whatever else is wrong with it. So the hosts are read from what the model sent, as it sent it:
every `host` value of the object (a key given twice names two), or what the text shows when it does
not parse (a call cut short).
"""

from __future__ import annotations

import json
import re
from typing import Any

_HOST_IN_TEXT = re.compile(r'"host"\s*:\s*"((?:[^"\\]|\\.)*)"')


def hosts_named(arguments: Any) -> list[str]:
    """Every host the call's arguments name."""
    if isinstance(arguments, dict):
        return [arguments["host"]] if isinstance(arguments.get("host"), str) else []
    if not isinstance(arguments, str):
        return []
    named: list[str] = []

    def collect(pairs: list[tuple[str, Any]]) -> dict:
        named.extend(v for k, v in pairs if k == "host" and isinstance(v, str))
        return dict(pairs)

    try:
        json.loads(arguments, object_pairs_hook=collect)
        return named
    except (ValueError, RecursionError):
        hosts = []
        for found in _HOST_IN_TEXT.finditer(arguments):
            try:
                hosts.append(json.loads(f'"{found.group(1)}"'))
            except ValueError:
                continue
        return hosts


def arguments_for_record(arguments: Any) -> Any:
    """A refused call's arguments as the model sent them: the object when they parse, the text otherwise."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments
