"""torch.cuda: answers from the simulated machine's GPUs and driver."""

import os
import warnings
from collections import namedtuple

from .. import _sim_host
from .. import version as _version
from . import nccl  # noqa: F401

_NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
              "driver from http://www.nvidia.com/Download/index.aspx")
_OLD_DRIVER = ("The NVIDIA driver on your system is too old (found version {found}). Please update your GPU driver "
               "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
               "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with "
               "your version of the CUDA driver.")

_initialized = False


def _cuda_number(version: str) -> int:
    major, minor = (int(x) for x in version.split(".")[:2])
    return major * 1000 + minor * 10


def _init_error():
    st = _sim_host.state()
    if st is None or not st["driver"]["loaded"]:
        return _NO_DRIVER
    if _cuda_number(st["driver"]["cuda"]) < _cuda_number(_version.cuda):
        return _OLD_DRIVER.format(found=_cuda_number(st["driver"]["cuda"]))
    return None


def _visible(gpus):
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return gpus
    chosen = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            break
        match = [g for g in gpus if item in (str(g["index"]), g["uuid"])]
        if not match:
            break  # like the driver: the list stops at the first invalid entry
        chosen.append(match[0])
    return chosen


def _gpus():
    st = _sim_host.state()
    return _visible(st["gpus"]) if st is not None and st["driver"]["loaded"] else []


def is_available() -> bool:
    error = _init_error()
    if error is not None:
        warnings.warn(f"CUDA initialization: {error} (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)",
                      UserWarning, stacklevel=2)
        return False
    return bool(_gpus())


def is_initialized() -> bool:
    return _initialized


def _lazy_init() -> None:
    global _initialized
    if _initialized:
        return
    error = _init_error()
    if error is not None:
        raise RuntimeError(error)
    if not _gpus():
        raise RuntimeError("No CUDA GPUs are available")
    _initialized = True


init = _lazy_init


def device_count() -> int:
    return len(_gpus()) if _init_error() is None else 0


def current_device() -> int:
    _lazy_init()
    return 0


def _gpu(device=None):
    _lazy_init()
    index = 0 if device is None else int(getattr(device, "index", device) or 0)
    gpus = _gpus()
    if not 0 <= index < len(gpus):
        raise AssertionError("Invalid device id")
    return gpus[index]


def get_device_name(device=None) -> str:
    return _gpu(device)["name"]


def get_device_capability(device=None) -> tuple:
    major, minor = _gpu(device)["compute_cap"].split(".")
    return int(major), int(minor)


_CudaDeviceProperties = namedtuple(
    "_CudaDeviceProperties", "name major minor total_memory multi_processor_count uuid L2_cache_size")


def get_device_properties(device=None):
    g = _gpu(device)
    major, minor = get_device_capability(device)
    return _CudaDeviceProperties(g["name"], major, minor, g["memory_total_mib"] * 1024 * 1024, g.get("sm_count", 188),
                                 g["uuid"][4:], g.get("l2_cache_mib", 128) * 1024 * 1024)


def get_arch_list() -> list:
    if _init_error() is not None:
        return []
    return list(_version._arch_list)


def synchronize(device=None) -> None:
    _lazy_init()


def mem_get_info(device=None) -> tuple:
    g = _gpu(device)
    total = g["memory_total_mib"] * 1024 * 1024
    return total - (g["memory_reserved_mib"] + g["memory_used_mib"]) * 1024 * 1024, total
