"""NVIDIA tools: nvidia-smi, nvcc and CUDA/driver runfiles."""

from __future__ import annotations

import posixpath

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.registry import _handles, _handles_matching

# -- runfiles


def _runfile(an: Analysis, path: str, args: list[Arg], launcher: str | None = None) -> None:
    """CUDA and driver `.run` installers: only `--silent --toolkit` without `--driver` is a side-by-side install."""
    name = posixpath.basename(path)
    flags = {a.text.split("=", 1)[0] for a in args if a.text}
    hidden = any(a.text is None for a in args)
    how = f"`{launcher} {name}`" if launcher else f"`{name}`"
    if name.startswith("NVIDIA-Linux") or "--driver" in flags:
        an.add(
            DESTRUCTIVE,
            "runfile:driver",
            f"{how} installs the NVIDIA driver, replacing the kernel module the GPUs run on",
        )
    elif "--uninstall" in flags:
        an.add(DESTRUCTIVE, "runfile:uninstall", f"{how} --uninstall removes an installed toolkit or driver")
    elif "--silent" in flags and "--toolkit" in flags and not hidden:
        an.add(
            MUTATING,
            "runfile:toolkit-only",
            f"{how} with --silent --toolkit installs a CUDA toolkit side by side, without touching the driver",
        )
    else:
        missing = " and ".join(f for f in ("--silent", "--toolkit") if f not in flags) or "arguments it can see"
        an.add(
            DESTRUCTIVE,
            "runfile:not-toolkit-only",
            f"{how} without {missing} can install the driver as well as the toolkit",
        )


# -- read-only commands with argument checks


_NVSMI_QUERY_FLAGS = frozenset(
    {"-L", "--list-gpus", "-q", "--query", "-x", "--xml-format", "-u", "--unit", "-h", "--help", "--version",
     "-B", "--list-excluded-gpus", "-a"}
)
_NVSMI_QUERY_VALUES = frozenset(
    {"-i", "--id", "-d", "--display", "-l", "--loop", "-lms", "--loop-ms", "--query-gpu",
     "--query-supported-clocks", "--query-compute-apps", "--query-accounted-apps", "--query-retired-pages",
     "--query-remapped-rows", "--format"}
)
_NVSMI_SETTINGS = frozenset(
    {"-pm", "--persistence-mode", "-pl", "--power-limit", "-ac", "--applications-clocks", "-rac",
     "--reset-applications-clocks", "-mig", "--multi-instance-gpu", "-c", "--compute-mode", "-e", "--ecc-config",
     "-p", "--reset-ecc-errors", "-lgc", "--lock-gpu-clocks", "-rgc", "--reset-gpu-clocks", "-lmc",
     "--lock-memory-clocks", "-rmc", "--reset-memory-clocks", "-am", "--accounting-mode", "-caa",
     "--clear-accounted-apps", "-acp", "--accounted-apps-permission", "-cc", "--cuda-clocks", "-dm",
     "--driver-model", "-fdm", "--force-driver-model", "-f", "--filename"}
)
_NVSMI_SUBCOMMANDS_READ = {
    "topo": ({"-m", "--matrix", "-mp", "--matrix_pci"}, {"-i", "--id"}),
    "nvlink": ({"-s", "--status", "-c", "--capabilities"}, {"-i", "--id", "-l", "--link"}),
    "dmon": (set(), {"-i", "--id", "-d", "--delay", "-c", "--count", "-s", "--select", "-o", "--options"}),
    "pmon": (set(), {"-i", "--id", "-d", "--delay", "-c", "--count", "-s", "--select", "-o", "--options"}),
    "mig": ({"-lgi", "-lgip", "-lci", "-lcip", "--list-gpu-instances", "--list-gpu-instance-profiles",
             "--list-compute-instances", "--list-compute-instance-profiles"}, {"-i", "--id", "-gi", "--gpu-instance-id"}),
}


@_handles("nvidia-smi")
def _nvidia_smi(an: Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    if texts and texts[0] and not texts[0].startswith("-"):
        _nvidia_smi_subcommand(an, cmd, texts[0], texts[1:])
        return
    problems = 0
    index = 0
    while index < len(texts):
        text = texts[index]
        index += 1
        if text is None:
            continue
        name, equals, _ = text.partition("=")
        if name in _NVSMI_QUERY_FLAGS and not equals:
            continue
        if name in _NVSMI_QUERY_VALUES:
            index += 0 if equals else 1
            continue
        problems += 1
        if name in ("-r", "--gpu-reset"):
            an.add(
                DESTRUCTIVE,
                "nvidia-smi:--gpu-reset",
                "`nvidia-smi --gpu-reset` resets the GPU, killing everything running on it",
            )
        elif name in _NVSMI_SETTINGS:
            an.add(MUTATING, f"nvidia-smi:{name}", f"`nvidia-smi {name}` changes a GPU setting or writes a file")
        else:
            an.add(MUTATING, f"nvidia-smi:{name}", f"`nvidia-smi {name}` is not a query flag the classifier accepts")
    if not problems:
        an.allow(cmd)


def _nvidia_smi_subcommand(an: Analysis, cmd: _Cmd, sub: str, rest: list[str | None]) -> None:
    if sub == "mig" and any(t and t.startswith(("-dgi", "-dci", "--destroy")) for t in rest):
        an.add(DESTRUCTIVE, "nvidia-smi:mig-destroy", "`nvidia-smi mig -dgi/-dci` destroys GPU instances")
        return
    spec = _NVSMI_SUBCOMMANDS_READ.get(sub)
    if spec is not None:
        flags, values = spec
        index, clean = 0, True
        while index < len(rest):
            text = rest[index] or ""
            if text in values:
                index += 2
                continue
            clean = clean and (text in flags or text.split("=", 1)[0] in values)
            index += 1
        if clean:
            an.allow(cmd, f"nvidia-smi {sub}")
            return
    an.add(MUTATING, f"nvidia-smi:{sub}", f"`nvidia-smi {sub}` with these arguments is not a read-only query")


@_handles("nvcc")
def _nvcc(an: Analysis, cmd: _Cmd) -> None:
    informative = {"--version", "-V", "--help", "-h", "--list-gpu-arch", "--list-gpu-code"}
    if all(t in informative for t in cmd.texts):
        an.allow(cmd)
    else:
        an.add(MUTATING, "nvcc:compile", "`nvcc` with these arguments compiles code and writes output files")


@_handles_matching(r".*\.run")
def _runfile_command(an: Analysis, cmd: _Cmd) -> None:
    _runfile(an, cmd.name, cmd.args)
