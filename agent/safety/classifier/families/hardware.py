"""Hardware and host tools that read through a device or a local service: BMC sensors (ipmitool),
Secure Boot state (mokutil), NVMe and SMART health, RDMA links, name lookups (getent), the clock's
tracking (chronyc), and the version of daemons (nvidia-persistenced, nv-fabricmanager, slurmd, srun).

Each is accepted only in its exact read forms, word by word: these tools also reset BMCs, enroll keys,
format disks, start self-tests, step the clock or start jobs, under options that look like the reads.
A tool's option that names another host (`ipmitool -H`, `chronyc -h`, `nvme discover`) is never a read
here. DCGM (`dcgmi`) and the CRI tools (`crictl`, `ctr`) stay refused: they talk to a daemon that acts,
and the red-team corpus of 2026-12-03 holds `dcgmi discovery -l` and `crictl ps` among those refused.
"""

from __future__ import annotations

import re

from agent.safety.classifier.command import MUTATING, Analysis, _Cmd
from agent.safety.classifier.registry import _handles

_DEVICE = re.compile(r"/dev/(nvme\d+(n\d+)?|sd[a-z]+|hd[a-z]+)")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _ipmitool(words: list[str]) -> bool:
    # local interface only (no -I lanplus -H HOST); sensor and SDR listings
    return (words[:1] == ["sdr"] and (words[1:] in ([], ["list"], ["elist"]) or len(words) == 3
                                      and words[1] in ("type", "entity") and _NAME.fullmatch(words[2]) is not None)
            or words[:1] == ["sensor"] and (words[1:] in ([], ["list"]) or words[1:2] == ["get"] and len(words) > 2
                                            and all(_NAME.fullmatch(w) for w in words[2:])))


def _getent(words: list[str]) -> bool:
    # A host name without a dot is looked up in /etc/hosts and the host's own search domains, never in an
    # outside zone the command names (`getent ahosts evil.example` asks evil.example's name servers).
    # shadow and gshadow hold password hashes.
    if len(words) < 2 or not all(_NAME.fullmatch(w) for w in words[1:]):
        return False
    if words[0] in ("hosts", "ahosts", "ahostsv4", "ahostsv6"):
        return all("." not in w for w in words[1:])
    return words[0] in ("passwd", "group", "services", "protocols")


_READS = {
    "mokutil": lambda w: w in (["--sb-state"], ["--list-enrolled"], ["--list-new"], ["--list-delete"],
                               ["--pk"], ["--kek"], ["--db"], ["--dbx"], ["--version"]),
    "ipmitool": _ipmitool,
    "nvidia-persistenced": lambda w: w in (["--version"], ["-v"], ["--help"], ["-h"]),
    "nvidia-fabricmanager": lambda w: w in (["--version"], ["-v"], ["--help"], ["-h"]),
    "nv-fabricmanager": lambda w: w in (["--version"], ["-v"], ["--help"], ["-h"]),
    "slurmd": lambda w: w in (["-V"], ["--version"], ["--help"]),
    "srun": lambda w: w in (["-V"], ["--version"], ["--usage"]),
    "nvme": lambda w: w in (["list"], ["list", "-o", "json"], ["list", "-v"], ["version"])
    or len(w) == 2 and w[0] in ("smart-log", "id-ctrl", "id-ns") and _DEVICE.fullmatch(w[1]) is not None,
    # -H health, -i identity, -a/-x all, -A attributes, -c capabilities; -s, -t, -o, -S, -X and --set change the disk
    "smartctl": lambda w: w == ["--scan"] or len(w) == 2 and w[0] in ("-H", "-i", "-a", "-x", "-A", "-c", "-Hi")
    and _DEVICE.fullmatch(w[1]) is not None,
    "ibdev2netdev": lambda w: w in ([], ["-v"]),
    "rdma": lambda w: w[:1] in (["link"], ["dev"], ["resource"], ["res"]) and w[1:2] in ([], ["show"])
    and all(_NAME.fullmatch(x) or re.fullmatch(r"[\w.-]+/\d+", x) for x in w[2:]),
    "getent": _getent,
    # chronyd answers these monitoring queries over its local socket; -h names another host, -m runs several
    "chronyc": lambda w: [x for x in w if x not in ("-n", "-c")] in (["tracking"], ["sources"], ["sources", "-v"],
                                                                      ["sourcestats"], ["activity"]),
}


@_handles(*_READS)
def _hardware(an: Analysis, cmd: _Cmd) -> None:
    words = cmd.texts
    if all(w is not None for w in words) and _READS[cmd.prog]([w for w in words if w is not None]):
        an.allow(cmd, f"{cmd.prog} {words[0]}" if words else cmd.prog)
        return
    an.add(MUTATING, f"{cmd.prog}:not-a-read",
           f"`{cmd.prog}` is accepted only in its read forms, and this is not one of them")
