"""nvidia-smi of the simulated host: `nvidia-smi dmon` here, everything else as simhost/smi.py prints it (the
runfile carries that one, and its published checksum changes only with the installer)."""

from __future__ import annotations

import sys
import time

from simhost import smi
from simhost import state as host_state
from simhost.smi import NOT_LOADED, RC_BAD_ARGUMENT, RC_DRIVER_NOT_LOADED, _select, _Usage, _value


def main(argv: list[str], root) -> int:
    if argv[:1] == ["dmon"]:
        return dmon(argv[1:], host_state.load(root))
    return smi.main(argv, root)


_DMON_HEAD = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n"
              "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n")


def dmon(argv: list[str], st: dict) -> int:
    """`nvidia-smi dmon`: one row per GPU every -d seconds (default 1), -c times (default: until stopped), the
    power, temperature, utilisation and clock columns (-s puc, the default); idle, as nothing runs on the GPUs."""
    count, delay, ids = None, 1.0, None
    args = list(argv)
    try:
        while args:
            a = args.pop(0)
            if a in ("-c", "-d", "-i", "-s", "-o", "-f"):
                value = _value(args, a)
                if a == "-c":
                    count = int(value)
                elif a == "-d":
                    delay = max(1.0, float(value))
                elif a == "-i":
                    ids = value
            elif a in ("-h", "--help"):
                sys.stdout.write("GPU statistics are displayed in scrolling format with one line per sampling "
                                 "interval.\n\n    Usage: nvidia-smi dmon [options]\n")
                return 0
            else:
                raise _Usage(f"ERROR: Option {a} is not recognized. Please run 'nvidia-smi dmon -h'.\n\n")
    except (_Usage, ValueError) as e:
        sys.stdout.write(str(e) if isinstance(e, _Usage) else "ERROR: Invalid value. Please run 'nvidia-smi dmon -h'.\n")
        return RC_BAD_ARGUMENT
    if not st["driver"]["loaded"]:
        sys.stdout.write(NOT_LOADED)
        return RC_DRIVER_NOT_LOADED
    gpus = st["gpus"] if ids is None else _select(st["gpus"], ids)
    if not gpus:
        sys.stdout.write("No devices were found\n")
        return 6
    sys.stdout.write(_DMON_HEAD)
    done = 0
    while count is None or done < count:
        for g in gpus:
            mtemp = str(g["temperature_c"] + 6) if g.get("ecc") == "Enabled" else "-"  # HBM reports its own
            clocks = g.get("clocks_mhz") or {}
            sys.stdout.write(f"{g['index']:>5} {round(g['power_draw_w']):>6} {g['temperature_c']:>6} {mtemp:>6}"
                             + "".join(f" {0:>6}" for _ in range(6))
                             + f" {clocks.get('memory', 0):>6} {clocks.get('graphics', 0):>6} \n")
        sys.stdout.flush()
        done += 1
        if count is None or done < count:
            time.sleep(delay)
    return 0
