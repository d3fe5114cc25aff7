"""The simulated machine: its GPUs, its driver, its kernel, its disks, as first built.

The default is the machine of the CUDA 12.8 -> 13 story: eight RTX PRO 6000 Blackwell
Workstation Edition cards (compute capability 12.0) on driver 590.48.01, whose CUDA version is 13.1,
under Ubuntu 24.04's 6.8 kernel. Other GPU models come from GPU_MODELS, each with what nvidia-smi
and torch report for it and the oldest driver branch that supports it.
"""

from __future__ import annotations

import re
import uuid

DEFAULT_GPU_MODEL = "RTX PRO 6000 Blackwell"
DRIVER_VERSION = "590.48.01"

# The newest CUDA each driver branch supports, as nvidia-smi reports it.
_DRIVER_CUDA = [(590, "13.1"), (580, "13.0"), (575, "12.9"), (570, "12.8"), (565, "12.7"), (560, "12.6"),
                (555, "12.5"), (550, "12.4"), (545, "12.3"), (535, "12.2"), (530, "12.1"), (525, "12.0"),
                (520, "11.8"), (515, "11.7"), (510, "11.6"), (495, "11.5"), (470, "11.4"), (465, "11.3"),
                (460, "11.2"), (455, "11.1"), (450, "11.0")]

# PCI bus of each slot on a dual-socket board with eight x16 slots.
_BUS_IDS = ["01", "21", "41", "61", "81", "A1", "C1", "E1", "02", "22", "42", "62", "82", "A2", "C2", "E2"]

# What each model reports. min_driver is the first driver branch that supports the card: a driver
# older than that does not bind to it, so a machine with one is not a machine anyone has.
# Data-center cards are passively cooled (no fan reading), keep ECC on and idle in P0 with
# persistence mode; the workstation card has a fan, ECC off and idles in P8.
GPU_MODELS: dict[str, dict] = {
    "RTX PRO 6000 Blackwell": {
        "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "brand": "NVIDIA RTX",
        "architecture": "Blackwell", "compute_cap": "12.0", "sm_count": 188, "l2_cache_mib": 128,
        "memory_total_mib": 97887, "memory_reserved_mib": 611, "bar1_mib": 131072,
        "power_limit_w": 600, "power_min_w": 150, "idle_power_w": 14.0, "idle_pstate": "P8", "fan_percent": 30,
        "ecc": False, "mig": False, "pcie_gen_max": 5, "temperature_c": 30, "min_driver": 570,
        "vbios": "98.02.52.00.02", "device_id": "0x2BB110DE", "sub_system_id": "0x204B10DE",
        "part_number": "2BB1-875-A1", "board_part_number": "900-5G144-2200-000", "serial_base": 1792025012345,
        "clocks_mhz": {"graphics": 180, "sm": 180, "memory": 405, "video": 600},
        "max_clocks_mhz": {"graphics": 2617, "sm": 2617, "memory": 14001, "video": 2025},
    },
    "H100 80GB HBM3": {
        "name": "NVIDIA H100 80GB HBM3", "brand": "NVIDIA", "architecture": "Hopper", "compute_cap": "9.0",
        "sm_count": 132, "l2_cache_mib": 50, "memory_total_mib": 81559, "memory_reserved_mib": 551,
        "bar1_mib": 131072, "power_limit_w": 700, "power_min_w": 200, "idle_power_w": 68.0, "idle_pstate": "P0",
        "fan_percent": None, "ecc": True, "mig": True, "pcie_gen_max": 5, "temperature_c": 29, "min_driver": 520,
        "vbios": "96.00.99.00.01", "device_id": "0x233010DE", "sub_system_id": "0x16C110DE",
        "part_number": "2330-885-A1", "board_part_number": "692-2G520-0200-000", "serial_base": 1652223019876,
        "clocks_mhz": {"graphics": 345, "sm": 345, "memory": 2619, "video": 765},
        "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619, "video": 1545},
    },
    "H200": {
        "name": "NVIDIA H200", "brand": "NVIDIA", "architecture": "Hopper", "compute_cap": "9.0",
        "sm_count": 132, "l2_cache_mib": 50, "memory_total_mib": 143771, "memory_reserved_mib": 551,
        "bar1_mib": 262144, "power_limit_w": 700, "power_min_w": 200, "idle_power_w": 74.0, "idle_pstate": "P0",
        "fan_percent": None, "ecc": True, "mig": True, "pcie_gen_max": 5, "temperature_c": 31, "min_driver": 550,
        "vbios": "96.00.A5.00.01", "device_id": "0x233510DE", "sub_system_id": "0x18BE10DE",
        "part_number": "2335-885-A1", "board_part_number": "692-2G520-0280-000", "serial_base": 1654324051234,
        "clocks_mhz": {"graphics": 345, "sm": 345, "memory": 3201, "video": 765},
        "max_clocks_mhz": {"graphics": 1980, "sm": 1980, "memory": 3201, "video": 1545},
    },
    "A100-SXM4-80GB": {
        "name": "NVIDIA A100-SXM4-80GB", "brand": "NVIDIA", "architecture": "Ampere", "compute_cap": "8.0",
        "sm_count": 108, "l2_cache_mib": 40, "memory_total_mib": 81920, "memory_reserved_mib": 567,
        "bar1_mib": 131072, "power_limit_w": 400, "power_min_w": 100, "idle_power_w": 58.0, "idle_pstate": "P0",
        "fan_percent": None, "ecc": True, "mig": True, "pcie_gen_max": 4, "temperature_c": 31, "min_driver": 450,
        "vbios": "92.00.45.00.05", "device_id": "0x20B210DE", "sub_system_id": "0x147F10DE",
        "part_number": "20B2-895-A1", "board_part_number": "692-2G506-0212-002", "serial_base": 1321021034567,
        "clocks_mhz": {"graphics": 210, "sm": 210, "memory": 1593, "video": 795},
        "max_clocks_mhz": {"graphics": 1410, "sm": 1410, "memory": 1593, "video": 1290},
    },
    "L40S": {
        "name": "NVIDIA L40S", "brand": "NVIDIA", "architecture": "Ada Lovelace", "compute_cap": "8.9",
        "sm_count": 142, "l2_cache_mib": 96, "memory_total_mib": 46068, "memory_reserved_mib": 483,
        "bar1_mib": 65536, "power_limit_w": 350, "power_min_w": 100, "idle_power_w": 32.0, "idle_pstate": "P8",
        "fan_percent": None, "ecc": True, "mig": False, "pcie_gen_max": 4, "temperature_c": 27, "min_driver": 535,
        "vbios": "95.02.66.00.02", "device_id": "0x26B910DE", "sub_system_id": "0x185110DE",
        "part_number": "26B9-895-A1", "board_part_number": "900-2G133-0080-000", "serial_base": 1323623045678,
        "clocks_mhz": {"graphics": 210, "sm": 210, "memory": 405, "video": 1185},
        "max_clocks_mhz": {"graphics": 2520, "sm": 2520, "memory": 9001, "video": 1965},
    },
}

# Ubuntu 24.04's kernel, as `uname -a` and /proc/version report it on a real install.
DEFAULT_KERNEL = "6.8.0-60-generic"
_KERNEL_BUILDS = {"6.8.0-60-generic": "#63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025"}
_KERNEL_COMPILER = ("x86_64-linux-gnu-gcc-13 (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0, "
                    "GNU ld (GNU Binutils for Ubuntu) 2.42")


def driver_cuda_version(driver_version: str) -> str:
    branch = driver_branch(driver_version)
    for floor, cuda in _DRIVER_CUDA:
        if branch >= floor:
            return cuda
    return "10.2"


def driver_branch(driver_version: str) -> int:
    return int(driver_version.split(".")[0])


def _folded(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower()).removeprefix("nvidia")


def gpu_model_key(asked: str) -> str:
    """The GPU_MODELS key a name means: the key or nvidia-smi's name in any case and spacing
    ("h100 80gb hbm3", "NVIDIA H200"), or the start of one that fits only it ("A100", "RTX PRO 6000").
    ValueError names the models there are."""
    folded = _folded(asked)
    exact = [k for k, m in GPU_MODELS.items() if folded in (_folded(k), _folded(m["name"]))]
    starts = [k for k, m in GPU_MODELS.items() if folded and (_folded(k).startswith(folded)
                                                              or _folded(m["name"]).startswith(folded))]
    found = exact or starts
    if len(found) != 1:
        raise ValueError(f"unknown GPU model {asked!r}; the sim has: {', '.join(GPU_MODELS)}")
    return found[0]


def check_driver_supports(model_key: str, driver_version: str) -> None:
    """ValueError when the driver is older than the first branch that supports the GPU model."""
    model, branch = GPU_MODELS[model_key], driver_branch(driver_version)
    if branch < model["min_driver"]:
        fitting = [key for key, m in GPU_MODELS.items() if m["min_driver"] <= branch]
        instead = f", or a GPU model it supports ({', '.join(fitting)})" if fitting else ""
        raise ValueError(f"driver {driver_version} is too old for the {model['name']}, which needs the "
                         f"{model['min_driver']} branch or newer: choose a driver of {model['min_driver']} or "
                         f"newer{instead}")


def gpu_table(count: int, model_key: str = DEFAULT_GPU_MODEL) -> list[dict]:
    m = GPU_MODELS[model_key]
    gpus = []
    for i in range(count):
        gpus.append({
            "index": i,
            "name": m["name"],
            # Stable across builds, distinct across cards.
            "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"simulated-gpu/{m['name']}/{i}")),
            "serial": f"{m['serial_base'] + i * 37}",
            "bus_id": f"00000000:{_BUS_IDS[i % len(_BUS_IDS)]}:00.0",
            "brand": m["brand"],
            "architecture": m["architecture"],
            "compute_cap": m["compute_cap"],
            "sm_count": m["sm_count"],
            "l2_cache_mib": m["l2_cache_mib"],
            "memory_total_mib": m["memory_total_mib"],
            "memory_reserved_mib": m["memory_reserved_mib"],
            "memory_used_mib": 0,
            "bar1_mib": m["bar1_mib"],
            "temperature_c": m["temperature_c"] + (i * 7) % 5,
            "power_draw_w": round(m["idle_power_w"] + (i * 3.37) % 9, 2),
            "power_limit_w": m["power_limit_w"],
            "power_min_w": m["power_min_w"],
            "fan_percent": m["fan_percent"],  # None: passively cooled, nvidia-smi says N/A
            "pstate": m["idle_pstate"],
            "persistence": "Enabled",
            "ecc": "Enabled" if m["ecc"] else "Disabled",
            "mig": "Disabled" if m["mig"] else "N/A",  # MIG-capable cards report the mode, others N/A
            "pcie_gen_max": m["pcie_gen_max"],
            "vbios": m["vbios"],
            "device_id": m["device_id"],
            "sub_system_id": m["sub_system_id"],
            "part_number": m["part_number"],
            "board_part_number": m["board_part_number"],
            "clocks_mhz": dict(m["clocks_mhz"]),
            "max_clocks_mhz": dict(m["max_clocks_mhz"]),
        })
    return gpus


def kernel_info(release: str = DEFAULT_KERNEL, version: str | None = None) -> dict:
    """What uname and /proc/version report. An Ubuntu release without a known build string gets one
    in Ubuntu's form, numbered after its ABI ("6.11.0-29-generic" -> "#29-Ubuntu SMP ...")."""
    if version is None:
        abi = re.match(r"\d+\.\d+\.\d+-(\d+)", release)
        version = _KERNEL_BUILDS.get(release) or \
            f"#{abi.group(1) if abi else 1}-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025"
    return {"name": "Linux", "release": release, "version": version, "machine": "x86_64",
            "operating_system": "GNU/Linux", "builder": "buildd@lcy02-amd64-098", "compiler": _KERNEL_COMPILER}


def default_state(*, gpus: int = 8, gpu_model: str = DEFAULT_GPU_MODEL, driver_version: str = DRIVER_VERSION,
                  smi_version: str | None = None, free_space_mb: dict[str, int] | None = None,
                  gcc: str | None = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) ",
                  kernel: str = DEFAULT_KERNEL, python: str, bench_noise: float = 0.25) -> dict:
    key = gpu_model_key(gpu_model)
    check_driver_supports(key, driver_version)
    space = {"/": 512_000, "/tmp": 64_000}
    space.update(free_space_mb or {})
    return {
        "schema": 1,
        "python": python,  # interpreter the sim's own scripts run with (recorded at build time)
        "gpu_model": key,
        "gpus": gpu_table(gpus, key),
        "driver": {
            "version": driver_version,
            "cuda": driver_cuda_version(driver_version),
            # nvidia-smi's own version; a container can ship an older one than the kernel module.
            "smi_version": smi_version or driver_version,
            "loaded": True,
            "open_kernel_module": True,
        },
        "kernel": kernel_info(kernel),
        "free_space_mb": space,
        "gcc": gcc,
        # Standard deviation (tok/s) of the benchmark's run-to-run noise.
        "bench": {"noise_sd": bench_noise, "model": "moonshotai/Kimi-K2.5", "max_running_requests": 48},
    }
