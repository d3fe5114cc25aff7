"""nvidia-smi: the table, -L, --query-gpu, -q and --version, in the layouts the real tool prints.

Layouts follow the 5xx drivers (the 91-column table with cells 41/24/22 wide). Values come
from the sim's state; the driver version and its CUDA version change when the runfile installs a
driver.
"""

from __future__ import annotations

import sys
import time

from . import state as host_state

NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.\n")

# Return codes documented in nvidia-smi(1).
RC_BAD_ARGUMENT = 2
RC_DRIVER_NOT_LOADED = 9

_RULE = "+" + "-" * 89 + "+"
_CELLS = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"


def main(argv: list[str], root) -> int:
    try:
        opts = _parse(argv)
    except _Usage as e:
        sys.stdout.write(str(e))
        return RC_BAD_ARGUMENT
    st = host_state.load(root)
    if opts.get("help"):
        sys.stdout.write(_HELP)
        return 0
    if not st["driver"]["loaded"]:
        sys.stdout.write(NOT_LOADED)
        return RC_DRIVER_NOT_LOADED
    if opts.get("version"):
        sys.stdout.write(version_text(st))
        return 0
    gpus = st["gpus"]
    if "id" in opts:
        gpus = _select(gpus, opts["id"])
        if gpus is None:
            sys.stdout.write("No devices were found\n")
            return 6
    if opts.get("list"):
        for g in gpus:
            sys.stdout.write(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n")
        return 0
    if "query_gpu" in opts:
        fmt = opts.get("format")
        if fmt is None:
            sys.stdout.write("Please specify --format=csv with --query-gpu.\n")
            return RC_BAD_ARGUMENT
        return _query_gpu(st, gpus, opts["query_gpu"], fmt)
    if opts.get("query"):
        sys.stdout.write(query_text(st, gpus, opts.get("display")))
        return 0
    sys.stdout.write(table_text(st, gpus))
    return 0


class _Usage(Exception):
    pass


def _parse(argv: list[str]) -> dict:
    opts: dict = {}
    args = list(argv)
    while args:
        a = args.pop(0)
        key, eq, val = a.partition("=")
        if a in ("-h", "--help"):
            opts["help"] = True
        elif a == "--version":
            opts["version"] = True
        elif a in ("-L", "--list-gpus"):
            opts["list"] = True
        elif a in ("-q", "--query", "-a"):
            opts["query"] = True
        elif key in ("-i", "--id"):
            opts["id"] = val if eq else _value(args, a)
        elif key in ("-d", "--display"):
            opts["display"] = (val if eq else _value(args, a)).upper().split(",")
        elif key == "--query-gpu":
            opts["query_gpu"] = [f.strip() for f in (val if eq else _value(args, a)).split(",") if f.strip()]
        elif key == "--format":
            opts["format"] = [f.strip() for f in (val if eq else _value(args, a)).split(",")]
        elif a.startswith("-"):
            raise _Usage(f"ERROR: Option {a} is not recognized. Please run 'nvidia-smi -h'.\n\n")
        else:
            raise _Usage("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n")
    return opts


def _value(args: list[str], flag: str) -> str:
    if not args:
        raise _Usage(f"ERROR: Option {flag} requires a value. Please run 'nvidia-smi -h'.\n\n")
    return args.pop(0)


def _select(gpus: list[dict], ids: str) -> list[dict] | None:
    chosen = []
    for ident in ids.split(","):
        match = [g for g in gpus if ident in (str(g["index"]), g["uuid"], g["bus_id"], g["serial"])]
        if not match:
            return None
        chosen.extend(match)
    return chosen


# --------------------------------------------------------------------------- the table


def table_text(st: dict, gpus: list[dict]) -> str:
    drv = st["driver"]
    lines = [
        time.asctime() + "       ",
        _RULE,
        f"| NVIDIA-SMI {drv['smi_version']:<23}Driver Version: {drv['version']:<15}CUDA Version: {drv['cuda']:<9}|",
        _CELLS,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for g in gpus:
        name = g["name"] if len(g["name"]) <= 27 else g["name"][:24] + "..."
        pers = "On" if g["persistence"] == "Enabled" else "Off"
        power = f"{int(round(g['power_draw_w']))}W"
        used = f"{g['memory_used_mib']}MiB"
        total = f"{g['memory_total_mib']}MiB"
        # The ECC cell counts uncorrectable errors when ECC is on; MIG-capable cards show the mode.
        ecc = "0" if g.get("ecc") == "Enabled" else "Off"
        lines += [
            f"| {g['index']:>3}  {name:<31}{pers:<3} |   {g['bus_id']} Off |{ecc:>21} |",
            f"| {_fan(g):>3}   {g['temperature_c']:>2}C    {g['pstate']:<2}{power:>16} / {g['power_limit_w']:>4}W |"
            f" {used:>10} / {total:>9} | {'0%':>7} {'Default':>12} |",
            f"|{'':41}|{'':24}|{g.get('mig', 'N/A'):>21} |",
            _CELLS,
        ]
    lines += [
        "",
        _RULE,
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
        "|  No running processes found" + " " * 61 + "|",
        _RULE,
    ]
    return "\n".join(lines) + "\n"


def _fan(g: dict) -> str:
    """The fan cell: a percentage, or N/A on a passively cooled card."""
    return "N/A" if g.get("fan_percent") is None else f"{g['fan_percent']}%"


def version_text(st: dict) -> str:
    drv = st["driver"]
    nvml = ".".join(drv["version"].split(".")[:2])
    return (f"NVIDIA-SMI version  : {drv['smi_version']}\n"
            f"NVML version        : {nvml}\n"
            f"DRIVER version      : {drv['version']}\n"
            f"CUDA Version        : {drv['cuda']}\n")


# --------------------------------------------------------------------------- --query-gpu

# canonical name -> (unit or None, value getter); aliases map to canonical names.
def _fields(st: dict, count: int) -> dict:
    drv = st["driver"]
    return {
        "timestamp": (None, lambda g: time.strftime("%Y/%m/%d %H:%M:%S.000")),
        "driver_version": (None, lambda g: drv["version"]),
        "count": (None, lambda g: str(count)),
        "name": (None, lambda g: g["name"]),
        "serial": (None, lambda g: g["serial"]),
        "uuid": (None, lambda g: g["uuid"]),
        "index": (None, lambda g: str(g["index"])),
        "pci.bus_id": (None, lambda g: g["bus_id"]),
        "pci.device_id": (None, lambda g: g["device_id"]),
        "pci.sub_device_id": (None, lambda g: g["sub_system_id"]),
        "pcie.link.gen.current": (None, lambda g: "1"),
        "pcie.link.gen.max": (None, lambda g: str(g.get("pcie_gen_max", 5))),
        "pcie.link.width.current": (None, lambda g: "16"),
        "pcie.link.width.max": (None, lambda g: "16"),
        "vbios_version": (None, lambda g: g["vbios"]),
        "display_mode": (None, lambda g: "Disabled"),
        "display_active": (None, lambda g: "Disabled"),
        "persistence_mode": (None, lambda g: g["persistence"]),
        "compute_mode": (None, lambda g: "Default"),
        "compute_cap": (None, lambda g: g["compute_cap"]),
        "driver_model.current": (None, lambda g: "[N/A]"),
        "mig.mode.current": (None, lambda g: _bracketed(g.get("mig", "N/A"))),
        "ecc.mode.current": (None, lambda g: g.get("ecc", "Disabled")),
        "fan.speed": ("%", lambda g: "[N/A]" if g.get("fan_percent") is None else str(g["fan_percent"])),
        "pstate": (None, lambda g: g["pstate"]),
        "memory.total": ("MiB", lambda g: str(g["memory_total_mib"])),
        "memory.reserved": ("MiB", lambda g: str(g["memory_reserved_mib"])),
        "memory.used": ("MiB", lambda g: str(g["memory_used_mib"])),
        "memory.free": ("MiB", lambda g: str(g["memory_total_mib"] - g["memory_reserved_mib"] - g["memory_used_mib"])),
        "utilization.gpu": ("%", lambda g: "0"),
        "utilization.memory": ("%", lambda g: "0"),
        "temperature.gpu": (None, lambda g: str(g["temperature_c"])),
        "temperature.memory": (None, lambda g: "N/A"),
        "power.draw": ("W", lambda g: f"{g['power_draw_w']:.2f}"),
        "power.limit": ("W", lambda g: f"{g['power_limit_w']:.2f}"),
        "enforced.power.limit": ("W", lambda g: f"{g['power_limit_w']:.2f}"),
        "power.default_limit": ("W", lambda g: f"{g['power_limit_w']:.2f}"),
        "power.min_limit": ("W", lambda g: f"{g.get('power_min_w', 150):.2f}"),
        "power.max_limit": ("W", lambda g: f"{g['power_limit_w']:.2f}"),
        "clocks.gr": ("MHz", lambda g: str(g["clocks_mhz"]["graphics"])),
        "clocks.sm": ("MHz", lambda g: str(g["clocks_mhz"]["sm"])),
        "clocks.mem": ("MHz", lambda g: str(g["clocks_mhz"]["memory"])),
        "clocks.video": ("MHz", lambda g: str(g["clocks_mhz"]["video"])),
        "clocks.max.gr": ("MHz", lambda g: str(g["max_clocks_mhz"]["graphics"])),
        "clocks.max.sm": ("MHz", lambda g: str(g["max_clocks_mhz"]["sm"])),
        "clocks.max.mem": ("MHz", lambda g: str(g["max_clocks_mhz"]["memory"])),
    }


def _bracketed(value: str) -> str:
    # --query-gpu writes a value that does not apply as [N/A], where the table and -q write N/A.
    return "[N/A]" if value == "N/A" else value


_ALIASES = {
    "gpu_name": "name", "gpu_serial": "serial", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
    "pci.bus": "pci.bus_id", "pstate": "pstate", "memory.total": "memory.total",
    "clocks.current.graphics": "clocks.gr", "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem", "clocks.current.video": "clocks.video",
    "clocks.max.graphics": "clocks.max.gr", "clocks.max.memory": "clocks.max.mem",
    "persistence-m": "persistence_mode", "compute-m": "compute_mode",
    "power.draw.instant": "power.draw", "power.draw.average": "power.draw",
}


def _query_gpu(st: dict, gpus: list[dict], names: list[str], fmt: list[str]) -> int:
    if not fmt or fmt[0] != "csv" or any(f not in ("csv", "noheader", "nounits") for f in fmt):
        sys.stdout.write(f'"{",".join(fmt)}" is not a valid format.\n\n')
        return RC_BAD_ARGUMENT
    table = _fields(st, len(st["gpus"]))
    canonical = []
    for n in names:
        c = _ALIASES.get(n, n)
        if c not in table:
            sys.stdout.write(f'Field "{n}" is not a valid field to query.\n\n')
            return RC_BAD_ARGUMENT
        canonical.append(c)
    units = "nounits" not in fmt
    out = []
    if "noheader" not in fmt:
        out.append(", ".join(c + (f" [{table[c][0]}]" if table[c][0] else "") for c in canonical))
    for g in gpus:
        row = []
        for c in canonical:
            unit, get = table[c]
            value = get(g)
            row.append(f"{value} {unit}" if unit and units and value[:1].isdigit() else value)
        out.append(", ".join(row))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


# --------------------------------------------------------------------------- -q


def query_text(st: dict, gpus: list[dict], display: list[str] | None) -> str:
    drv = st["driver"]
    out = ["", "==============NVSMI LOG==============", "",
           _kv(0, "Timestamp", time.asctime()),
           _kv(0, "Driver Version", drv["version"]),
           _kv(0, "CUDA Version", drv["cuda"]), "",
           _kv(0, "Attached GPUs", str(len(st["gpus"])))]
    for g in gpus:
        out.append(f"GPU {g['bus_id']}")
        for section, lines in _gpu_sections(st, g):
            if display is None or section in display:
                out.extend(lines)
    return "\n".join(out) + "\n\n"


def _kv(depth: int, key: str, value: str) -> str:
    indent = "    " * depth
    return f"{indent}{key:<{42 - len(indent)}}: {value}"


def _gpu_sections(st: dict, g: dict):
    drv = st["driver"]
    free = g["memory_total_mib"] - g["memory_reserved_mib"] - g["memory_used_mib"]
    yield "INFO", [
        _kv(1, "Product Name", g["name"]),
        _kv(1, "Product Brand", g.get("brand", "NVIDIA RTX")),
        _kv(1, "Product Architecture", g.get("architecture", "Blackwell")),
        _kv(1, "Display Mode", "Disabled"),
        _kv(1, "Display Active", "Disabled"),
        _kv(1, "Persistence Mode", g["persistence"]),
        _kv(1, "Addressing Mode", "HMM"),
        "    MIG Mode",
        _kv(2, "Current", g.get("mig", "N/A")),
        _kv(2, "Pending", g.get("mig", "N/A")),
        _kv(1, "Accounting Mode", "Disabled"),
        _kv(1, "Accounting Mode Buffer Size", "4000"),
        "    Driver Model",
        _kv(2, "Current", "N/A"),
        _kv(2, "Pending", "N/A"),
        _kv(1, "Serial Number", g["serial"]),
        _kv(1, "GPU UUID", g["uuid"]),
        _kv(1, "Minor Number", str(g["index"])),
        _kv(1, "VBIOS Version", g["vbios"]),
        _kv(1, "MultiGPU Board", "No"),
        _kv(1, "Board ID", hex(int(g["bus_id"].split(":")[1], 16) << 8)),
        _kv(1, "Board Part Number", g.get("board_part_number", "900-5G144-2200-000")),
        _kv(1, "GPU Part Number", g["part_number"]),
        _kv(1, "GSP Firmware Version", drv["version"]),
        "    PCI",
        _kv(2, "Bus", "0x" + g["bus_id"].split(":")[1]),
        _kv(2, "Device", "0x00"),
        _kv(2, "Domain", "0x0000"),
        _kv(2, "Device Id", g["device_id"]),
        _kv(2, "Bus Id", g["bus_id"]),
        _kv(2, "Sub System Id", g["sub_system_id"]),
        "        GPU Link Info",
        "            PCIe Generation",
        _kv(4, "Max", str(g.get("pcie_gen_max", 5))),
        _kv(4, "Current", "1"),
        "            Link Width",
        _kv(4, "Max", "16x"),
        _kv(4, "Current", "16x"),
        _kv(1, "Fan Speed", "N/A" if g.get("fan_percent") is None else f"{g['fan_percent']} %"),
    ]
    yield "PERFORMANCE", [_kv(1, "Performance State", g["pstate"])]
    yield "MEMORY", [
        "    FB Memory Usage",
        _kv(2, "Total", f"{g['memory_total_mib']} MiB"),
        _kv(2, "Reserved", f"{g['memory_reserved_mib']} MiB"),
        _kv(2, "Used", f"{g['memory_used_mib']} MiB"),
        _kv(2, "Free", f"{free} MiB"),
        "    BAR1 Memory Usage",
        _kv(2, "Total", f"{g.get('bar1_mib', 131072)} MiB"),
        _kv(2, "Used", "1 MiB"),
        _kv(2, "Free", f"{g.get('bar1_mib', 131072) - 1} MiB"),
    ]
    yield "COMPUTE", [_kv(1, "Compute Mode", "Default")]
    yield "UTILIZATION", [
        "    Utilization",
        _kv(2, "GPU", "0 %"),
        _kv(2, "Memory", "0 %"),
        _kv(2, "Encoder", "0 %"),
        _kv(2, "Decoder", "0 %"),
    ]
    yield "ECC", [
        "    ECC Mode",
        _kv(2, "Current", g.get("ecc", "Disabled")),
        _kv(2, "Pending", g.get("ecc", "Disabled")),
    ]
    yield "TEMPERATURE", [
        "    Temperature",
        _kv(2, "GPU Current Temp", f"{g['temperature_c']} C"),
        _kv(2, "GPU T.Limit Temp", f"{57 - g['temperature_c'] % 3} C"),
        _kv(2, "GPU Shutdown T.Limit Temp", "-5 C"),
        _kv(2, "GPU Slowdown T.Limit Temp", "-2 C"),
        _kv(2, "GPU Max Operating T.Limit Temp", "0 C"),
        _kv(2, "GPU Target Temperature", "N/A"),
        _kv(2, "Memory Current Temp", "N/A"),
        _kv(2, "Memory Max Operating T.Limit Temp", "N/A"),
    ]
    yield "POWER", [
        "    GPU Power Readings",
        _kv(2, "Average Power Draw", f"{g['power_draw_w']:.2f} W"),
        _kv(2, "Instantaneous Power Draw", f"{g['power_draw_w']:.2f} W"),
        _kv(2, "Current Power Limit", f"{g['power_limit_w']:.2f} W"),
        _kv(2, "Requested Power Limit", f"{g['power_limit_w']:.2f} W"),
        _kv(2, "Default Power Limit", f"{g['power_limit_w']:.2f} W"),
        _kv(2, "Min Power Limit", f"{g.get('power_min_w', 150):.2f} W"),
        _kv(2, "Max Power Limit", f"{g['power_limit_w']:.2f} W"),
    ]
    yield "CLOCK", [
        "    Clocks",
        _kv(2, "Graphics", f"{g['clocks_mhz']['graphics']} MHz"),
        _kv(2, "SM", f"{g['clocks_mhz']['sm']} MHz"),
        _kv(2, "Memory", f"{g['clocks_mhz']['memory']} MHz"),
        _kv(2, "Video", f"{g['clocks_mhz']['video']} MHz"),
        "    Max Clocks",
        _kv(2, "Graphics", f"{g['max_clocks_mhz']['graphics']} MHz"),
        _kv(2, "SM", f"{g['max_clocks_mhz']['sm']} MHz"),
        _kv(2, "Memory", f"{g['max_clocks_mhz']['memory']} MHz"),
        _kv(2, "Video", f"{g['max_clocks_mhz']['video']} MHz"),
    ]
    yield "PIDS", [_kv(1, "Processes", "None")]


_HELP = """NVIDIA System Management Interface -- v{version}

NVSMI provides monitoring information for Tesla and select Quadro devices.
The data is presented in either a plain text or an XML format, via stdout or a file.
NVSMI also provides several management operations for changing the device state.

Supported in this build: (no options) table, -L, -q [-i ID] [-d SECTIONS],
--query-gpu=FIELDS --format=csv[,noheader][,nounits], --version, -h.
""".replace("{version}", "simulated")
