"""NVIDIA tools: nvidia-smi, nvcc and CUDA/driver runfiles."""

from __future__ import annotations

import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec
from agent.safety.classifier.registry import _handles, _handles_matching, files_read_ok

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


# -- nvidia-smi
#
# Read from `nvidia-smi -h` and each subcommand's `-h` of driver 580.159 (and the 550-575 man pages).
# Its parser is its own: every option only by its exact name, one or two dashes as listed
# (`-lgc`, `--lock-gpu-clocks`), a value as the next word or after `=` (`-d=CLOCK`, `--format csv`);
# no abbreviations (`--fi=X` is refused), no clusters (`-qx` is refused), no stuck values (`-i0` is
# refused). A word the spec cannot place exactly is therefore not read-only: either the program
# refuses it, or it is an option this spec does not know.

_SMI_SET = Effect(MUTATING, "changes a GPU setting")
_SMI_FILE = Effect(MUTATING, "writes its output to a file")  # the file is judged as a write too
_SMI_EFFECTS = {
    # a loop prints until it is stopped: the session would wait on it, and a time limit ends it as a failure
    "loop": Effect(MUTATING, "repeats its query until stopped and never ends; query once, without -l"),
    "file": _SMI_FILE,
    # the encrypted debug log goes to the file named
    "debug": Effect(MUTATING, "writes an encrypted debug log to a file"),
    "set": _SMI_SET,
    # ECC, persistence, compute mode, clocks, power and MIG mode: each changes how the GPU serves work
    "clocks": Effect(MUTATING, "locks, resets or changes GPU clocks"),
    "power": Effect(MUTATING, "changes the GPU power limit"),
    "ecc": Effect(MUTATING, "toggles ECC or resets ECC error counts (evidence of failing memory)"),
    "mode": Effect(MUTATING, "changes the compute, persistence, virtualization or operation mode"),
    "mig": Effect(MUTATING, "turns Multi-Instance GPU mode on or off"),
    "accounting": Effect(MUTATING, "changes or clears process accounting"),
    "host": Effect(MUTATING, "sets the host name stored on the GPU"),
    "led": Effect(MUTATING, "sets the unit's LED"),
    # a reset kills every process using the GPU
    "reset": Effect(DESTRUCTIVE, "resets the GPU, killing everything running on it"),
}

NVIDIA_SMI = Spec(
    "nvidia-smi",
    # help, lists and queries
    "-h|--help --version -L|--list-gpus -B|--list-excluded-gpus -col|--columns -a -q|--query -u|--unit "
    "-x|--xml-format --dtd -d|--display= -i|--id= -l|--loop=!loop -lms|--loop-ms=!loop "
    "--query-gpu= --query-supported-clocks= --query-compute-apps= --query-accounted-apps= "
    "--query-retired-pages= --query-remapped-rows= --format= -eow|--error-on-warning --get-hostname "
    "--help-query-gpu --help-query-supported-clocks --help-query-compute-apps --help-query-accounted-apps "
    "--help-query-retired-pages --help-query-remapped-rows --help-vgpu-query-scheduler-logs "
    "--help-gpu-instance-vgpu-query-scheduler-logs "
    # output to a file
    "-f|--filename=!file --debug=!debug "
    # device modification
    "-pm|--persistence-mode=!mode -e|--ecc-config=!ecc -p|--reset-ecc-errors=!ecc -c|--compute-mode=!mode "
    "--gom=!mode -r|--gpu-reset!reset -vm|--virt-mode=!mode -lgc|--lock-gpu-clocks=!clocks -m|--mode=!clocks "
    "-rgc|--reset-gpu-clocks!clocks -lmc|--lock-memory-clocks=!clocks -rmc|--reset-memory-clocks!clocks "
    "-lmcd|--lock-memory-clocks-deferred=!clocks -rmcd|--reset-memory-clocks-deferred!clocks "
    "-ac|--applications-clocks=!clocks -rac|--reset-applications-clocks!clocks "
    "-acp|--applications-clocks-permission=!clocks -pl|--power-limit=!power -sc|--scope=!power "
    "-cc|--cuda-clocks=!clocks -am|--accounting-mode=!accounting -caa|--clear-accounted-apps!accounting "
    "--auto-boost-default=!clocks --auto-boost-permission=!clocks -mig|--multi-instance-gpu=!mig "
    "-gtt|--gpu-target-temp=!set -den|--dram-encryption=!set --set-hostname=!host "
    "-dm|--driver-model=!mode -fdm|--force-driver-model=!mode -t|--toggle-led=!led",
    style="exact", single_dash_long=True, effects=_SMI_EFFECTS, help=(),
)


def _sub(label: str, options: str, effects: dict[str, Effect] | None = None) -> Spec:
    return Spec("nvidia-smi", options, style="exact", single_dash_long=True, effects=effects, label=label, help=())


_SUB_EFFECTS = {
    # a loop prints until it is stopped: the session would wait on it, and a time limit ends it as a failure
    "loop": Effect(MUTATING, "repeats its query until stopped and never ends; query once, without -l"),
    "file": _SMI_FILE,
    "set": _SMI_SET,
    "counters": Effect(MUTATING, "resets or reprograms hardware counters"),
    "drain": Effect(MUTATING, "puts the GPU into (or out of) the drain state, so it takes no new work"),
    "remove": Effect(DESTRUCTIVE, "removes the GPU from the system"),
    "discover": Effect(MUTATING, "rescans the bus for GPUs removed earlier"),
    "mig-create": Effect(MUTATING, "creates MIG GPU or compute instances"),
    "mig-destroy": Effect(DESTRUCTIVE, "destroys MIG GPU or compute instances and what runs on them"),
}

_NVSMI_SUBCOMMANDS = {
    "topo": _sub("topo", "-h|--help -m|--matrix -mp|--matrix_pci -i|--id= -c|--cpu= -n|--nearest_gpus= "
                         "-p|--gpu_path -p2p|--p2pstatus= -C|--get-numa-id-of-nearby-cpu "
                         "-M|--get-numa-id-of-nearby-mem -gnid|--gpu-numa-id -nvme|--matrix_nvme"),
    "nvlink": _sub("nvlink", "-h|--help -i|--id= -l|--link= -s|--status -c|--capabilities -p|--pcibusid "
                             "-R|--remotelinkinfo -gc|--getcontrol= -g|--getcounters= -e|--errorcounters "
                             "-ec|--crcerrorcounters -gt|--getthroughput= -gLowPwrInfo|--getLowPowerInfo "
                             "-gBwMode|--getBandwidthMode -cBridge|--checkBridge -gLWidth|--getLinkWidth "
                             "-info|--info -sc|--setcontrol=!counters -r|--resetcounters=!counters "
                             "-re|--reseterrorcounters!counters -sLowPwrThres|--setLowPowerThreshold=!set "
                             "-sBwMode|--setBandwidthMode=!set -sLWidth|--setLinkWidth=!set", _SUB_EFFECTS),
    "c2c": _sub("c2c", "-h|--help -i|--id= -l|--link= -s|--status -e|--errorCounters "
                       "-gLowPwrInfo|-getLowPowerInfo|--getLowPowerInfo"),
    "clocks": _sub("clocks", "-h|--help -i|--id= --sync-boost-list --sync-boost-add=!set --sync-boost-remove=!set "
                             "-som|--sparse-operation-mode=!set", _SUB_EFFECTS),
    "encodersessions": _sub("encodersessions", "-h|--help -i|--id= -l|--loop=!loop", _SUB_EFFECTS),
    "fbcsessions": _sub("fbcsessions", "-h|--help -i|--id= -l|--loop=!loop", _SUB_EFFECTS),
    "drain": _sub("drain", "-h|--help -p|--pciid= -q|--query -m|--modify=!drain -r|--remove!remove "
                           "-d|--discover!discover", _SUB_EFFECTS),
    "dmon": _sub("dmon", "-h|--help -i|--id= -d|--delay= -c|--count= -s|--select= --gpm-metrics= --gpm-options= "
                         "-o|--options= --format= -f|--filename=!file", _SUB_EFFECTS),
    "pmon": _sub("pmon", "-h|--help -i|--id= -d|--delay= -c|--count= -s|--select= -o|--options= "
                         "-f|--filename=!file", _SUB_EFFECTS),
    "mig": _sub("mig", "-h|--help -i|--id= -gi|--gpu-instance-id= -ci|--compute-instance-id= "
                       "-lgip|--list-gpu-instance-profiles -lgipp|--list-gpu-instance-possible-placements "
                       "-lgi|--list-gpu-instances -lcip|--list-compute-instance-profiles "
                       "-lcipp|--list-compute-instance-possible-placements -lci|--list-compute-instances "
                       "-C|--default-compute-instance!mig-create -cgi|--create-gpu-instance=!mig-create "
                       "-cci|--create-compute-instance[=]!mig-create -dgi|--destroy-gpu-instance!mig-destroy "
                       "-dci|--destroy-compute-instance!mig-destroy", _SUB_EFFECTS),
    "boost-slider": _sub("boost-slider", "-h|--help -i|--id= -l|--list --vboost=!set", _SUB_EFFECTS),
    # power-hint only estimates: its clock and temperature arguments are inputs of the estimate
    "power-hint": _sub("power-hint", "-h|--help -i|--id= -l|--list-info -gc|--graphics-clock= "
                                     "-mc|--memory-clock= -t|--temperature= -p|--profile="),
    "base-clocks": _sub("base-clocks", "-h|--help -i|--id="),
    "conf-compute": _sub("conf-compute", "-h|--help -i|--id= -gc|--get-cpu-caps -gg|--get-gpus-caps "
                                         "-d|--get-devtools-mode -e|--get-environment -f|--get-cc-feature "
                                         "-gm|--get-mem-size-info -grs|--get-gpus-ready-state "
                                         "-gkr|--get-key-rotation-threshold-info -mgm|--get-multigpu-mode "
                                         "-q|--query-conf-compute -sm|--set-unprotected-mem-size=!set "
                                         "-srs|--set-gpus-ready-state=!set "
                                         "-skr|--set-key-rotation-max-attacker-advantage=!set", _SUB_EFFECTS),
    "gpm": _sub("gpm", "-h|--help -i|--id= -g|--get-stream-state -s|--set-stream-state=!set", _SUB_EFFECTS),
    "pci": _sub("pci", "-h|--help -i|--id= -gErrCnt|--getErrorCounters -gCnt|--getCounters "
                       "-cErrCnt|--clearErrorCounters!counters", _SUB_EFFECTS),
    "power-smoothing": _sub("power-smoothing", "-h|--help -i|--id= -p|--profile= -ppd|--print-profile-definitions "
                                               "-spp|--set-preset-profile=!set -ptf|--percent-tmp-floor=!set "
                                               "-rur|--ramp-up-rate=!set -rdr|--ramp-down-rate=!set "
                                               "-rdh|--ramp-down-hysteresis=!set -s|--state=!set "
                                               "-spf|--secondary-power-floor=!set "
                                               "-pfawm|--primary-floor-act-win-mult=!set "
                                               "-pftwm|--primary-floor-tar-win-mult=!set "
                                               "-pfao|--primary-floor-act-offset=!set", _SUB_EFFECTS),
    "power-profiles": _sub("power-profiles", "-h|--help -i|--id= -l|--list -ld|--list-detailed -gr|--get-requested "
                                             "-ge|--get-enforced -sr|--set-requested=!set -cr|--clear-requested=!set",
                           _SUB_EFFECTS),
    "compute-policy": _sub("compute-policy", "-h|--help -i|--id= -l|--list --set-timeslice=!set", _SUB_EFFECTS),
    "vgpu": _sub("vgpu", "-h|--help -i|--id= -gi|--gpu-instance-id= -q|--query -u|--utilization --gpm-metrics= "
                         "-p|--pmon -s|--supported -c|--creatable -es|--encodersessions -m|--migrationcap "
                         "-ss|--schedulerstate -sc|--schedulercaps -sl|--schedulerlogs "
                         "--query-vgpu-scheduler-logs= -v|--verbose -l|--loop=!loop -lms|--loop-ms=!loop "
                         "--query-accounted-apps= -fs|--fbcsessions -ghm|--get-heterogeneous-mode -tm|--matrix "
                         "-p2p|--p2pstatus= --query-gpu-instance-vgpu-scheduler-logs= --format= "
                         "-f|--filename=!file -caa|--clear-accounted-apps!set -shm|--set-heterogeneous-mode=!set "
                         "-smts|--set-mig-timeslice-mode=!set", _SUB_EFFECTS),
    # replay reads the daemon's log (-f) and may write what it extracts (-r)
    "replay": _sub("replay", "-h|--help -i|--id= -s|--select= -f|--filename= -b|--begin= -e|--end= "
                             "-r|--redirect=!file", _SUB_EFFECTS),
}
# Effects whose rule keeps the name it had before the specs (tests and transcripts use it).
_SMI_RULES = {"mig-destroy": "nvidia-smi:mig-destroy", "reset": "nvidia-smi:--gpu-reset"}
_SMI_WRITES = frozenset({"file", "debug"})


def _misplaced(arg: Arg, spec: Spec) -> bool:
    """A single-dash word nvidia-smi would not take: a cluster (`-qx`) or a stuck value (`-i0`, `-pm1`).
    Only exact names, and `-X=VALUE`, are its syntax; it refuses anything else before doing anything
    (or it is an option the spec lacks)."""
    text = arg.text
    if text is None or not text.startswith("-") or text.startswith("--") or len(text) <= 2:
        return False
    name = text.split("=", 1)[0]
    return not ("-" + name in spec.long or (len(name) == 2 and text[2] == "="))


def _smi_judge(an: Analysis, cmd: _Cmd, spec: Spec, args: list[Arg], label: str, extra=None) -> None:
    """Like judge_by_spec, but every effect is recorded (a reset next to an unknown word is still a
    reset), written files are judged as writes, and words out of nvidia-smi's syntax are unknown."""
    cut = next((i for i, a in enumerate(args) if a.text == "--"), len(args))
    misplaced = [a for a in args[:cut] if _misplaced(a, spec)]
    # What the other words do is still recorded: a reset next to a refused word is not waved through.
    parsed = spec.parse([a for a in args if not any(a is m for m in misplaced)])
    problems = 0
    # A value that looks like an option (`-l -r`): whether nvidia-smi takes it as the value or as
    # the next option (it does the latter for options whose value may be left out) is not known here,
    # so what it would do as an option is recorded too.
    dashed = [u.value for u in parsed.used if u.value is not None and (u.value.text or "").startswith("-")]
    effects = parsed.effects + [u for d in dashed for u in spec.parse([d]).effects]
    for used in effects:
        key = used.option.effect or ""
        effect = spec.effects[key]
        written = used.written[1:] if used.written[1:] in used.option.names else used.written  # `-pm`
        meaning = "" if written == used.option.shown else f" (`{used.option.shown}`)"
        rule = _SMI_RULES.get(key, f"nvidia-smi:{used.option.shown}")
        an.add(effect.cls, rule, f"`{label} {written}`{meaning} {effect.what}")
        if key in _SMI_WRITES and used.value is not None:
            target = used.value if not (used.value.text or "").startswith("=") else Arg(used.value.text[1:])
            an.write(target, f"`{label} {written}`", "nvidia-smi")
        problems += 1
    strange = [m.text for m in misplaced[:1]] or parsed.unknown[:1] or [d.text for d in dashed[:1]]
    if strange:
        an.add(MUTATING, "nvidia-smi:unknown-option",
               f"`{label}` with `{strange[0]}`: not an option nvidia-smi takes as written (it reads only exact "
               f"option names, without clusters or abbreviations), so what it does cannot be told")
        problems += 1
    if parsed.operands:
        an.add(MUTATING, f"nvidia-smi:{label.removeprefix('nvidia-smi').strip() or 'operand'}",
               f"`{label}` with `{parsed.operands[0].text}` is not a read-only query")
        problems += 1
    if extra is not None and not extra(an, parsed):
        problems += 1
    if not problems:
        an.allow(cmd, None if label == "nvidia-smi" else label)


def _replay_input(an: Analysis, parsed: Parsed) -> bool:
    return files_read_ok(an, "nvidia-smi", parsed.values("-f"), "nvidia-smi replay -f")


@_handles("nvidia-smi")
def _nvidia_smi(an: Analysis, cmd: _Cmd) -> None:
    first = cmd.args[0].text if cmd.args else ""
    if first is not None and first and not first.startswith("-"):
        _nvidia_smi_subcommand(an, cmd, first)
        return
    _smi_judge(an, cmd, NVIDIA_SMI, cmd.args, "nvidia-smi")


def _nvidia_smi_subcommand(an: Analysis, cmd: _Cmd, sub: str) -> None:
    spec = _NVSMI_SUBCOMMANDS.get(sub)
    if spec is None:
        # daemon runs in the background and writes its logs (/var/log/nvstats); prm and others are not known
        an.add(MUTATING, f"nvidia-smi:{sub}", f"`nvidia-smi {sub}` is not a read-only query the classifier knows")
        return
    _smi_judge(an, cmd, spec, cmd.args[1:], f"nvidia-smi {sub}", _replay_input if sub == "replay" else None)


# -- nvcc: only the words that print and exit. nvcc reads options by their exact names (`--vers` is
# refused), so a spec of its hundreds of compiler options would buy nothing: every other word compiles,
# links, runs a host compiler (-ccbin) or the result (--run), or writes (-o).

_NVCC_INFORMATIVE = frozenset(
    {"--version", "-V", "--help", "-h", "--list-gpu-arch", "-arch-ls", "--list-gpu-code", "-code-ls"}
)


@_handles("nvcc")
def _nvcc(an: Analysis, cmd: _Cmd) -> None:
    if all(t in _NVCC_INFORMATIVE for t in cmd.texts):
        an.allow(cmd)
    else:
        an.add(MUTATING, "nvcc:compile", "`nvcc` with these arguments compiles code and writes output files")


# The CUDA toolkit's deviceQuery sample lists each device's properties (it makes a context, as a torch
# probe does) and takes no arguments that matter; only the toolkit's own copy, named by its path.
_DEVICE_QUERY = re.compile(r"/usr/local/cuda(-\d+(\.\d+)*)?/extras/demo_suite/deviceQuery")


@_handles("deviceQuery")
def _device_query(an: Analysis, cmd: _Cmd) -> None:
    if _DEVICE_QUERY.fullmatch(cmd.name) and not cmd.args:
        an.allow(cmd)
    else:
        an.add(MUTATING, "unknown-command", f"`{cmd.name}` is not the CUDA toolkit's deviceQuery "
                                            "(/usr/local/cuda*/extras/demo_suite/deviceQuery, without arguments)")


@_handles_matching(r".*\.run")
def _runfile_command(an: Analysis, cmd: _Cmd) -> None:
    _runfile(an, cmd.name, cmd.args)


SPECS = [NVIDIA_SMI, *_NVSMI_SUBCOMMANDS.values()]


# -- the container toolkit: only what prints. nvidia-ctk's other commands rewrite runtime configuration;
# nvidia-container-cli's global options load kernel modules (--load-kmods) or write logs (--debug).
_CONTAINER_TOOL_READS = {
    "nvidia-ctk": ({"--version", "cdi list"}, {"-v"}),
    "nvidia-container-cli": ({"--version", "info", "list"}, {"-V"}),
}


@_handles("nvidia-ctk", "nvidia-container-cli")
def _container_toolkit(an: Analysis, cmd: _Cmd) -> None:
    words, short = _CONTAINER_TOOL_READS[cmd.prog]
    texts = cmd.texts
    joined = " ".join(t or "\0" for t in texts)
    if joined in words or len(texts) == 1 and texts[0] in short:
        an.allow(cmd, f"{cmd.prog} {joined}")  # `nvidia-ctk cdi list` lists the CDI specs it finds
    elif cmd.prog == "nvidia-container-cli" and texts[:1] == ["list"] and all(t in ("--libraries", "--binaries",
                                                                                   "--ipcs", "--firmwares")
                                                                         for t in texts[1:]):
        an.allow(cmd, f"{cmd.prog} list")
    else:
        what = "changes container runtime configuration" if cmd.prog == "nvidia-ctk" else \
            "configures containers or loads kernel modules"
        an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` {what}; only {', '.join(sorted(words | short))} print")
