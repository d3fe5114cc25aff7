"""The simulated machine this installation lives in: found by walking up to ROOT/.sim/state.json."""

import os
import sys
from pathlib import Path

_found = None


def host():
    """(root, simhost package), or (None, None) when this torch is not inside a simulated host."""
    global _found
    if _found is None:
        _found = _find()
    return _found


def _find():
    here = Path(os.path.realpath(__file__)).parent
    for d in (here, *here.parents):
        if (d / ".sim" / "state.json").is_file():
            lib = str(d / ".sim" / "lib")
            if lib not in sys.path:
                sys.path.append(lib)
            import simhost.perf  # noqa: F401
            import simhost.state  # noqa: F401
            import simhost

            return d, simhost
    return None, None


def state():
    root, simhost = host()
    return simhost.state.load(root) if root is not None else None
