"""The simulated machine: its GPUs, its driver, its disks, as first built.

The default is the machine of the CUDA 12.8 -> 13 story: eight RTX PRO 6000 Blackwell
Workstation Edition cards (compute capability 12.0) on driver 590.48.01, whose CUDA version is 13.1.
"""

from __future__ import annotations

import uuid

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
DRIVER_VERSION = "590.48.01"

# The newest CUDA each driver branch supports, as nvidia-smi reports it.
_DRIVER_CUDA = [(590, "13.1"), (580, "13.0"), (575, "12.9"), (570, "12.8"), (565, "12.7"), (560, "12.6"),
                (555, "12.5"), (550, "12.4"), (545, "12.3"), (535, "12.2"), (530, "12.1"), (525, "12.0")]

# PCI bus of each slot on a dual-socket board with eight x16 slots.
_BUS_IDS = ["01", "21", "41", "61", "81", "A1", "C1", "E1", "02", "22", "42", "62", "82", "A2", "C2", "E2"]


def driver_cuda_version(driver_version: str) -> str:
    branch = int(driver_version.split(".")[0])
    for floor, cuda in _DRIVER_CUDA:
        if branch >= floor:
            return cuda
    return "11.8"


def gpu_table(count: int, name: str = GPU_NAME) -> list[dict]:
    gpus = []
    for i in range(count):
        gpus.append({
            "index": i,
            "name": name,
            # Stable across builds, distinct across cards.
            "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"simulated-gpu/{name}/{i}")),
            "serial": f"{1792025012345 + i * 37}",
            "bus_id": f"00000000:{_BUS_IDS[i % len(_BUS_IDS)]}:00.0",
            "compute_cap": "12.0",
            "memory_total_mib": 97887,
            "memory_reserved_mib": 611,
            "memory_used_mib": 0,
            "temperature_c": 30 + (i * 7) % 5,
            "power_draw_w": round(14.0 + (i * 3.37) % 9, 2),
            "power_limit_w": 600,
            "fan_percent": 30,
            "pstate": "P8",
            "persistence": "Enabled",
            "vbios": "98.02.52.00.02",
            "device_id": "0x2BB110DE",
            "sub_system_id": "0x204B10DE",
            "part_number": "2BB1-875-A1",
            "clocks_mhz": {"graphics": 180, "sm": 180, "memory": 405, "video": 600},
            "max_clocks_mhz": {"graphics": 2617, "sm": 2617, "memory": 14001, "video": 2025},
        })
    return gpus


def default_state(*, gpus: int = 8, gpu_name: str = GPU_NAME, driver_version: str = DRIVER_VERSION,
                  smi_version: str | None = None, free_space_mb: dict[str, int] | None = None,
                  gcc: str | None = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) ",
                  python: str, bench_noise: float = 0.25) -> dict:
    space = {"/": 512_000, "/tmp": 64_000}
    space.update(free_space_mb or {})
    return {
        "schema": 1,
        "python": python,  # interpreter the sim's own scripts run with (recorded at build time)
        "gpus": gpu_table(gpus, gpu_name),
        "driver": {
            "version": driver_version,
            "cuda": driver_cuda_version(driver_version),
            # nvidia-smi's own version; a container can ship an older one than the kernel module.
            "smi_version": smi_version or driver_version,
            "loaded": True,
            "open_kernel_module": True,
        },
        "free_space_mb": space,
        "gcc": gcc,
        # Standard deviation (tok/s) of the benchmark's run-to-run noise.
        "bench": {"noise_sd": bench_noise, "model": "moonshotai/Kimi-K2.5", "max_running_requests": 48},
    }
