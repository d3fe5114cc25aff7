"""Inventory: programs that report what a host is and runs (vmstat, top -b, pstree, last, readelf,
systemd-analyze, dmidecode, InfiniBand and sensor tools), and the version forms of build tools
(`gcc --version`, `cmake --version`), which are otherwise not read-only.
"""

from __future__ import annotations

from agent.safety.classifier.command import MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import REMOTE, REMOTE_HOST, Effect, Parsed, Spec
from agent.safety.classifier.paths import read_risk
from agent.safety.classifier.registry import _HANDLERS, files_read_ok, judge_by_spec, specified

_REMOTE = {REMOTE: REMOTE_HOST}

VMSTAT = Spec("vmstat", "-a|--active -f|--forks -m|--slabs -n|--one-header -s|--stats -d|--disk -D|--disk-sum "
                        "-p|--partition= -S|--unit= -w|--wide -t|--timestamp -y|--no-first -h|--help -V|--version")
PSTREE = Spec("pstree", "-a|--arguments -A|--ascii -c|--compact-not -C|--color= -g|--show-pgids -G|--vt100 "
                        "-h|--highlight-all -H|--highlight-pid= -l|--long -n|--numeric-sort -N|--ns-sort= "
                        "-p|--show-pids -s|--show-parents -S|--ns-changes -t|--thread-names -T|--hide-threads "
                        "-u|--uid-changes -U|--unicode -V|--version -Z|--security-context --help")
LAST = Spec(
    "last",
    "-NUM -a|--hostlast -d|--dns!dns -f|--file= -F|--fulltimes -i|--ip -n|--limit= -R|--nohostname -s|--since= "
    "-t|--until= -p|--present= -w|--fullnames -x|--system --time-format= -h|--help -V|--version",
    effects={"dns": Effect(MUTATING, "looks up host names in the DNS, other hosts")},
)
# top is read-only only in batch mode: interactively it reads keys that kill and renice processes.
TOP = Spec("top", "-b|--batch-mode -c|--cmdline-toggle -d|--delay= -E|--scale-summary-mem= -e|--scale-task-mem= "
                  "-H|--threads-show -i|--idle-toggle -n|--iterations= -O|--list-fields -o|--sort-override= "
                  "-p|--pid= -S|--accum-time-toggle -s|--secure-mode -U|--filter-any-user= -u|--filter-only-euser= "
                  "-w|--width[=] -1|--single-cpu-toggle -h|--help -V|--version")
READELF = Spec(
    "readelf",
    "-a|--all -h|--file-header -l|--program-headers|--segments -S|--section-headers|--sections -g|--section-groups "
    "-t|--section-details -e|--headers -s|--syms|--symbols --dyn-syms --lto-syms --sym-base= -C|--demangle[=] "
    "--no-demangle --recurse-limit --no-recurse-limit -U|--unicode= -n|--notes -r|--relocs -u|--unwind -d|--dynamic "
    "-V|--version-info -A|--arch-specific -c|--archive-index -D|--use-dynamic -L|--lint|--enable-checks "
    "-x|--hex-dump= -p|--string-dump= -R|--relocated-dump= -z|--decompress -w|--debug-dump[=] -P|--process-links "
    "--dwarf-depth= --dwarf-start= --ctf= --ctf-parent= --ctf-symbols= --ctf-strings= --sframe[=] -I|--histogram "
    "-W|--wide -T|--silent-truncation -H|--help -v|--version",
    files=True,  # it opens the files it is given
)
# Only the verbs that read the boot's timing; `verify`, `security` and the rest load unit files or
# run generators. Options by their full names (systemd's getopt_long tables take prefixes).
SYSTEMD_ANALYZE = Spec(
    "systemd-analyze",
    "--system --user --global -H|--host=!remote -M|--machine=!remote --order --require --from-pattern= "
    "--to-pattern= --fuzz= --no-pager -q|--quiet --base-time= --iterations= --json= -h|--help --version "
    "--recursive-errors= --offline= --threshold= --security-policy= --man[=] --generators[=] --profile= --root= "
    "--image=!image",
    effects={**_REMOTE, "image": Effect(MUTATING, "mounts a disk image to read it")},
)
_SYSTEMD_ANALYZE_READS = frozenset({"time", "blame", "critical-chain"})
DMIDECODE = Spec(
    "dmidecode",
    "-d|--dev-mem= -h|--help -q|--quiet -s|--string= -t|--type= -H|--handle= -u|--dump --dump-bin=!writes "
    "--from-dump= --no-sysfs --oem-string= -V|--version",
    effects={"writes": Effect(MUTATING, "writes the firmware tables to a file")},
)
IBSTAT = Spec("ibstat", "-d|--debug -l|--list_of_cas -s|--short -p|--port_list -V|--version -C|--Ca= -P|--Port= "
                        "-h|--help", help=())
IBV_DEVINFO = Spec("ibv_devinfo", "-d|--ib-dev= -i|--ib-port= -l|--list -v|--verbose", help=())
SENSORS = Spec(
    "sensors",
    "-c|--config-file= -h|--help -s|--set!set -A|--no-adapter -u -j --bus-list -f|--fahrenheit -v|--version",
    effects={"set": Effect(MUTATING, "writes the limits of the configuration file to the chips")},
)


def _file_values(an: Analysis, cmd: _Cmd, parsed: Parsed, *names: str) -> bool:
    return files_read_ok(an, cmd.prog, parsed.values(*names))


def _response_files(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    for operand in parsed.operands:
        if (operand.text or "").startswith("@"):
            problem = read_risk((operand.text or "")[1:], an.cwd)
            if problem is not None:
                an.add(problem[0], f"{cmd.prog}:{problem[1]}", f"`{cmd.prog} {operand.text}` reads its arguments from "
                                                               f"that file: {problem[2]}")
                return False
    return True


def _top(an: Analysis, cmd: _Cmd) -> None:
    def batch_only(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        if not parsed.has("-b") and not parsed.has("-h", "-V", "-O"):
            an_.add(MUTATING, "top:interactive", "`top` without -b reads keys that kill and renice processes")
            return False
        return not parsed.operands or _unexpected(an_, cmd_, parsed)

    judge_by_spec(an, cmd, TOP, batch_only)


def _unexpected(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    an.add(MUTATING, f"{cmd.prog}:operand", f"`{cmd.prog}` takes no operand `{parsed.operands[0].text}` here")
    return False


def _systemd_analyze(an: Analysis, cmd: _Cmd) -> None:
    def reads(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        verb = parsed.operands[0].text if parsed.operands else "time"
        if verb not in _SYSTEMD_ANALYZE_READS:
            an_.add(MUTATING, f"systemd-analyze:{verb or 'unknown'}",
                    f"`systemd-analyze {verb or '...'}` is not one of its timing reports ({', '.join(sorted(_SYSTEMD_ANALYZE_READS))})")
            return False
        return _file_values(an_, cmd_, parsed, "--root")

    judge_by_spec(an, cmd, SYSTEMD_ANALYZE, reads)


def _dmidecode(an: Analysis, cmd: _Cmd) -> None:
    def tables(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        if parsed.values("-d"):  # the memory device it maps (default /dev/mem, unused where sysfs has the tables)
            an_.add(MUTATING, "dmidecode:--dev-mem", "`dmidecode -d` maps the device it names and reads it raw")
            return False
        return _file_values(an_, cmd_, parsed, "--from-dump") and (not parsed.operands or _unexpected(an_, cmd_, parsed))

    judge_by_spec(an, cmd, DMIDECODE, tables)


# Build tools change the host with any other arguments (they compile and write files); their version
# forms print a line. Keeps the rules `mutating:gcc` and the like for everything else.
_VERSION_FORMS = {
    "gcc": ({"--version", "-v", "-dumpversion", "-dumpfullversion", "-dumpmachine"}, "compiles code and writes output files"),
    "g++": ({"--version", "-v", "-dumpversion", "-dumpfullversion", "-dumpmachine"}, "compiles code and writes output files"),
    "cc": ({"--version", "-v", "-dumpversion", "-dumpmachine"}, "compiles code and writes output files"),
    "cmake": ({"--version"}, "configures a build and writes files"),
    "make": ({"--version", "-v"}, "runs build commands"),
    "ninja": ({"--version"}, "runs build commands"),
}


def _version_form(an: Analysis, cmd: _Cmd) -> None:
    forms, what = _VERSION_FORMS[cmd.prog]
    if len(cmd.args) == 1 and cmd.args[0].text in forms:
        an.allow(cmd, f"{cmd.prog} {cmd.args[0].text}")
    else:
        an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` {what}")


_HANDLERS["vmstat"] = specified(VMSTAT)
_HANDLERS["pstree"] = specified(PSTREE)
_HANDLERS["last"] = specified(LAST, lambda an, cmd, parsed: _file_values(an, cmd, parsed, "-f"))
_HANDLERS["top"] = _top
# binutils read `@FILE` as more arguments: readelf opens FILE before anything else.
_HANDLERS["readelf"] = specified(READELF, _response_files)
_HANDLERS["systemd-analyze"] = _systemd_analyze
_HANDLERS["dmidecode"] = _dmidecode
_HANDLERS["ibstat"] = specified(IBSTAT)
_HANDLERS["ibv_devinfo"] = specified(IBV_DEVINFO)
_HANDLERS["sensors"] = specified(SENSORS, lambda an, cmd, parsed: _file_values(an, cmd, parsed, "-c"))
for _name in _VERSION_FORMS:
    _HANDLERS[_name] = _version_form

SPECS = [VMSTAT, PSTREE, LAST, TOP, READELF, SYSTEMD_ANALYZE, DMIDECODE, IBSTAT, IBV_DEVINFO, SENSORS]
