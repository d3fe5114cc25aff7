"""df and lsmod of the simulated host.

df answers for paths inside the sim root from the free space configured in the state (so the
installer's disk check and anything that runs `df` agree); for anything else it hands over to
the real df. lsmod lists the NVIDIA modules while the driver is loaded.
"""

from __future__ import annotations

import os
import shutil
import sys

from . import state as host_state

_USED_MB = 20_480  # what the simulated filesystems hold besides their free space


def df_main(argv: list[str], root) -> int:
    paths = [a for a in argv if not a.startswith("-")]
    flags = [a for a in argv if a.startswith("-")]
    known = {"-P", "--portability", "-k", "-m", "-h", "--human-readable", "-B1", "--block-size=1", "-T"}
    inside = [host_state.system_path(root, p) for p in paths]
    if not paths or any(s is None for s in inside) or any(f not in known for f in flags) or \
            not all(os.path.exists(p) for p in paths):
        return _real("df", argv)
    st = host_state.load(root)
    posix = "-P" in flags or "--portability" in flags
    human = "-h" in flags or "--human-readable" in flags
    scale, unit = (1, "1B") if ("-B1" in flags or "--block-size=1" in flags) else \
        ((1, "1M") if "-m" in flags else (1, "1K"))
    label = {"1K": "1024-blocks" if posix else "1K-blocks", "1M": "1M-blocks", "1B": "1B-blocks"}[unit]
    rows = [("Filesystem", "Size" if human else label, "Used", "Avail" if human else "Available",
             "Capacity" if posix else "Use%", "Mounted on")]
    for sys_path in inside:
        mount, free_mb = host_state.free_space_mb(st, sys_path)
        total_mb, used_mb = free_mb + _USED_MB, _USED_MB
        device = "/dev/nvme0n1p2" if mount == "/" else f"/dev/nvme0n1p{3 + sorted(st['free_space_mb']).index(mount)}"
        shown = str(root) if mount == "/" else str(host_state.host_path(root, mount))
        pct = f"{-(-used_mb * 100 // total_mb)}%"
        if human:
            size = lambda mb: f"{mb / 1024:.0f}G" if mb >= 10240 else f"{mb / 1024:.1f}G" if mb >= 1024 else f"{mb}M"  # noqa: E731
            rows.append((device, size(total_mb), size(used_mb), size(free_mb), pct, shown))
        else:
            to = {"1K": 1024, "1M": 1, "1B": 1024 * 1024}[unit]
            rows.append((device, str(total_mb * to // scale), str(used_mb * to // scale), str(free_mb * to // scale),
                         pct, shown))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 5)] + [r[5]]
        sys.stdout.write(" ".join(cells) + "\n")
    return 0


def lsmod_main(argv: list[str], root) -> int:
    st = host_state.load(root)
    sys.stdout.write("Module                  Size  Used by\n")
    if st["driver"]["loaded"]:
        sys.stdout.write("nvidia_uvm           2076672  0\n"
                         "nvidia_drm            139264  0\n"
                         "nvidia_modeset       1830912  1 nvidia_drm\n"
                         f"nvidia              {104_857_600 + 4096 * len(st['gpus']):>9}  "
                         f"{2 + len(st['gpus'])} nvidia_uvm,nvidia_modeset\n")
    return 0


# Inside the sim's sandbox this machine's own programs are here (the sim's /usr/bin links to them).
HOST_USR_BIN = "/.host/usr/bin"


def _real(name: str, argv: list[str]) -> int:
    """The machine's own program, for the forms the sim does not simulate (df -i, df without a path...)."""
    own = os.path.dirname(os.path.realpath(sys.argv[0]))
    search = os.pathsep.join([HOST_USR_BIN, *(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d and os.path.realpath(d) != own)])
    real = shutil.which(name, path=search)
    if real is None:
        sys.stderr.write(f"{name}: command not found\n")
        return 127
    os.execv(real, [name, *argv])
    return 1
