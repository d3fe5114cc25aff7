"""kubectl get node -o jsonpath, get pods (--field-selector spec.nodeName=N), cordon, uncordon, annotate node,
drain: one Kubernetes node."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from . import state as cluster
from .state import fail as _err


def kubectl_main(argv: list[str], root: Path) -> int:
    st = cluster.load(root)
    k = st.get("kubernetes")
    if k is None:
        return _err("The connection to the server localhost:8080 was refused - did you specify the right host or port?")
    node = st["node"]
    words = [a for a in argv if not a.startswith("-")]
    if words[:2] == ["get", "node"] or words[:2] == ["get", "nodes"]:
        if len(words) > 2 and words[2] != node:
            return _err(f'Error from server (NotFound): nodes "{words[2]}" not found')
        out = argv[argv.index("-o") + 1] if "-o" in argv else ""
        if out.startswith("jsonpath="):
            values = {".spec.unschedulable": "true" if k.get("cordoned") else "",
                      **{f".metadata.annotations.{key}": v for key, v in k.get("annotations", {}).items()}}
            print(re.sub(r"\{([^}]*)\}", lambda m: values.get(m.group(1), ""), out[len("jsonpath="):]), end="")
            return 0
        print(f"NAME STATUS ROLES AGE VERSION\n{node} Ready{',SchedulingDisabled' if k.get('cordoned') else ''} "
              "<none> 90d v1.31.2")
        return 0
    if words[:2] in (["get", "pods"], ["get", "pod"]):
        wanted = next((a.split("=", 1)[1] for a in argv if a.startswith("spec.nodeName=")), None)
        pods = [] if wanted not in (None, node) else cluster.running(k.get("pods", []), k.get("cordoned_at"))
        names = [f"train-{i}-7d9f8" for i in pods]
        if "-o" in argv and argv[argv.index("-o") + 1] == "name":
            print("".join(f"pod/{n}\n" for n in names), end="")
        elif not names:
            print("No resources found", file=sys.stderr)
        else:
            print("NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE\n"
                  + "".join(f"default     {n}   1/1     Running   0          3d\n" for n in names), end="")
        return 0
    if len(words) < 2 or (words[0] in ("cordon", "uncordon", "drain") and words[1] != node) or (
            words[0] == "annotate" and (len(words) < 4 or words[2] != node)):
        return _err(f'Error from server (NotFound): nodes "{words[1] if len(words) > 1 else ""}" not found')
    if words[0] == "cordon":
        k["cordoned"] = True
        k.setdefault("cordoned_at", time.time())
        print(f"node/{node} cordoned")
    elif words[0] == "uncordon":
        # The pods evicted while it was cordoned are gone from it: an uncordoned node runs only those still there.
        k.update(cordoned=False, cordoned_at=None, pods=[k.get("pods", [])[i] for i in
                                                         cluster.running(k.get("pods", []), k.get("cordoned_at"))])
        print(f"node/{node} uncordoned")
    elif words[0] == "annotate":
        for pair in words[3:]:
            if pair.endswith("-"):
                k.setdefault("annotations", {}).pop(pair[:-1], None)
            else:
                key, _, value = pair.partition("=")
                if key in k.get("annotations", {}) and "--overwrite" not in argv:
                    return _err(f"error: --overwrite is false but found the following declared annotation(s): '{key}' "
                                "already has a value")
                k.setdefault("annotations", {})[key] = value
        print(f"node/{node} annotated")
    elif words[0] == "drain":
        k["cordoned"] = True
        k["cordoned_at"] = k.get("cordoned_at") or time.time()
        cluster.save(root, st)
        timeout = next((float(a.split("=", 1)[1].rstrip("s")) for a in argv if a.startswith("--timeout=")), 0)
        began = time.time()
        while cluster.running(k.get("pods", []), k["cordoned_at"]):
            if timeout and time.time() - began > timeout:
                return _err(f"error: unable to drain node \"{node}\" due to error: global timeout reached: "
                            f"{timeout:g}s, continuing command...")
            time.sleep(0.2)
        print(f"node/{node} drained")
        return 0
    else:
        return _err(f"kubectl: this simulated kubectl knows get node, get pods, cordon, uncordon, annotate node and drain, "
                    f"not {words[0]!r}", 2)
    cluster.save(root, st)
    return 0
