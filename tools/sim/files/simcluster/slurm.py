"""scontrol (show node, update nodename=... state=drain|resume) and squeue (-w NODE) of one Slurm node."""

from __future__ import annotations

import time
from pathlib import Path

from . import state as cluster
from .state import fail as _err


def scontrol_main(argv: list[str], root: Path) -> int:
    st = cluster.load(root)
    s = st.get("slurm")
    if s is None:
        return _err("scontrol: error: Unable to contact slurm controller (connect failure)")
    node = st["node"]
    if argv[:2] == ["show", "node"]:
        if len(argv) > 2 and argv[2] != node:
            return _err(f"Node {argv[2]} not found")
        jobs = cluster.running(s["jobs"], s.get("drained_at"))
        base = "MIXED" if jobs else "IDLE"
        shown = f"{base}+DRAIN" if s.get("drained") else (s.get("state") if jobs else "IDLE")
        reason = f" Reason={s['reason']} [{s.get('by', 'root')}@2026-12-01T09:00:00]" if s.get("drained") else ""
        print(f"NodeName={node} Arch=x86_64 CoresPerSocket=32 CPUAlloc={64 if jobs else 0} State={shown} "
              f"Partitions=gpu Gres=gpu:8{reason}")
        return 0
    if argv[:1] == ["update"]:
        fields = dict(a.split("=", 1) for a in argv[1:] if "=" in a)
        fields = {k.lower(): v for k, v in fields.items()}
        if fields.get("nodename") != node:
            return _err(f"slurm_update error: Invalid node name specified ({fields.get('nodename')})")
        want = fields.get("state", "").lower()
        if want == "drain":
            if not fields.get("reason"):
                return _err("You must specify a reason when DRAINING a node")
            s.update(drained=True, reason=fields["reason"], by="root", drained_at=s.get("drained_at") or time.time())
        elif want == "resume":
            if not s.get("drained"):
                return _err(f"slurm_update error: Invalid node state specified (node {node} is not drained)")
            # The jobs that ended while it was drained are gone: a resumed node runs only those still running.
            s.update(drained=False, reason=None, drained_at=None,
                     jobs=[s["jobs"][i] for i in cluster.running(s["jobs"], s.get("drained_at"))])
        else:
            return _err(f"slurm_update error: Invalid node state specified ({want})")
        cluster.save(root, st)
        return 0
    return _err(f"scontrol: this simulated scontrol knows `show node` and `update`, not {' '.join(argv[:2])!r}", 2)


def squeue_main(argv: list[str], root: Path) -> int:
    st = cluster.load(root)
    s = st.get("slurm")
    if s is None:
        return _err("squeue: error: Unable to contact slurm controller (connect failure)")
    wanted = argv[argv.index("-w") + 1] if "-w" in argv else None
    header = "-h" not in argv
    if header:
        print("JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)")
    if wanted not in (None, st["node"]):
        return 0
    for i in cluster.running(s["jobs"], s.get("drained_at")):
        print(f"{1000 + i}" if "-o" in argv else f"{1000 + i} gpu train ml R 1:00:00 1 {st['node']}")
    return 0
