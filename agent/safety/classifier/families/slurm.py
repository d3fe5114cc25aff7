"""Slurm's clients that only read: sinfo, squeue, sacct, sstat, sprio, sshare, sdiag, and scontrol's
`show`, `ping`, `listpids` and `version`.

They ask the cluster's controller (or its database) and print; on a GPU node they are how an engineer
sees whether the node runs jobs and who drained it. Options by their full names and getopt_long's
unique prefixes, as Slurm parses them; an option not listed (`--iterate`, which keeps running; sacct's
`--file`; sdiag's `--reset`, which clears the controller's statistics) is not read-only. scontrol's
command words are taken only whole: scontrol accepts abbreviations (`upd` is `update`), and a word
that is not exactly one of its reading commands is not read-only, nor is scontrol without one (it then
reads commands from its input). Everything else of Slurm (scancel, sbatch, srun, salloc, sacctmgr,
strigger, scontrol update/create/delete/reconfigure/hold/requeue/write...) is not read-only. A
`SLURM_CONF=` before the command is an assignment, never read-only (it could load other plugins).
"""

from __future__ import annotations

from agent.safety.classifier.command import MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import Parsed, Spec
from agent.safety.classifier.registry import _HANDLERS, judge_by_spec, specified

_OUTPUT = "--json[=] --yaml[=] -h|--help --usage -V|--version -v|--verbose"

SINFO = Spec("sinfo", "-a|--all -d|--dead -e|--exact --federation -h|--noheader --hide -l|--long -L|--local "
                      "-M|--clusters= -n|--nodes= --noconvert -N|--Node -o|--format= -O|--Format= -p|--partition= "
                      "-r|--responding -R|--list-reasons -s|--summarize -S|--sort= -t|--states= -T|--reservation "
                      "--json[=] --yaml[=] --help --usage -V|--version -v|--verbose", help=())
SQUEUE = Spec("squeue", "-A|--account= -a|--all -r|--array --array-unique --federation -h|--noheader --hide "
                        "-j|--jobs[=] -L|--licenses= --local -l|--long -M|--clusters= --me -n|--name= --noconvert "
                        "-o|--format= -O|--Format= -p|--partition= -P|--priority -q|--qos= -R|--reservation= "
                        "--sibling -s|--steps[=] -S|--sort= --start -t|--states= -u|--user= -w|--nodelist= "
                        "--json[=] --yaml[=] --help --usage -V|--version -v|--verbose", help=())
SACCT = Spec("sacct", "-a|--allusers -A|--accounts= -b|--brief -c|--completion -D|--duplicates -E|--endtime= "
                      "-e|--helpformat -j|--jobs= -l|--long -L|--allclusters -M|--clusters= -n|--noheader "
                      "-N|--nodelist= --name= --noconvert -o|--format= -P|--parsable2 -p|--parsable -q|--qos= "
                      "-r|--partition= -S|--starttime= -s|--state= -T|--truncate -u|--user= --uid= --units= "
                      "-X|--allocations -x|--associations= --delimiter= " + _OUTPUT, help=())
SSTAT = Spec("sstat", "-a|--allsteps -e|--helpformat -i|--pidformat -j|--jobs= -n|--noheader -o|--format|--fields= "
                      "-p|--parsable -P|--parsable2 --noconvert " + _OUTPUT, help=())
SPRIO = Spec("sprio", "-h|--noheader -j|--jobs[=] -l|--long -M|--clusters= -n|--norm -o|--format= -p|--partition= "
                      "-S|--sort= -u|--user= -w|--weights --federation --local --sibling --help --usage "
                      "-V|--version -v|--verbose", help=())
SSHARE = Spec("sshare", "-a|--all -A|--accounts= -e|--helpformat -h|--noheader -l|--long -M|--clusters= "
                        "-m|--partition -o|--format= -P|--parsable2 -p|--parsable -U|--Users -u|--users= "
                        "--json[=] --yaml[=] --help --usage -V|--version -v|--verbose", help=())
SDIAG = Spec("sdiag", "-a|--all -M|--clusters= -i|--sort-by-id -t|--sort-by-time -T|--sort-by-time2 "
                      "--json[=] --yaml[=] -h|--help --usage -V|--version", help=())
SCONTROL = Spec("scontrol", "-a|--all -d|--details --federation --local -M|--clusters= -o|--oneliner -Q|--quiet "
                            "--sibling -v|--verbose --json[=] --yaml[=] -h|--help -V|--version", help=())

# What `scontrol show` shows, by its full names (singular and plural, as scontrol takes them).
_SHOWN = frozenset({"aliases", "assoc_mgr", "bbstat", "burstbuffer", "config", "daemons", "dwstat", "federation",
                    "frontend", "hostlist", "hostlistsorted", "hostnames", "job", "jobs", "licenses", "node", "nodes",
                    "partition", "partitions", "reservation", "reservations", "slurmd", "step", "steps", "topology",
                    "topo"})
_READS = frozenset({"show", "ping", "listpids", "version"})


def _no_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands:
        an.add(MUTATING, f"{cmd.prog}:operand", f"`{cmd.prog}` takes no operand `{parsed.operands[0].text}`")
        return False
    return True


def _scontrol(an: Analysis, cmd: _Cmd) -> None:
    def reads(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        words = [a.text for a in parsed.operands]
        if parsed.has("-h", "-V") and not words:
            return True
        verb = words[0] if words else None
        if verb not in _READS:
            what = f"`scontrol {verb}`" if verb else "`scontrol` without a command (it reads commands from its input)"
            an_.add(MUTATING, f"scontrol:{verb or 'interactive'}",
                    f"{what} is not one of its reading commands ({', '.join(sorted(_READS))}, taken whole: scontrol "
                    "also takes abbreviations, `upd` for update)")
            return False
        if verb == "show":
            if len(words) < 2 or words[1] not in _SHOWN or len(words) > 3:
                shown = " ".join(w or "?" for w in words[1:])
                an_.add(MUTATING, "scontrol:show", f"`scontrol show {shown}` is not `show ENTITY [NAME]` with an entity "
                                                   "scontrol shows, by its full name")
                return False
        elif len(words) > 1:
            an_.add(MUTATING, f"scontrol:{verb}", f"`scontrol {verb}` takes no operand here")
            return False
        return True

    judge_by_spec(an, cmd, SCONTROL, reads)


for _spec in (SINFO, SQUEUE, SACCT, SSTAT, SPRIO, SSHARE, SDIAG):
    _HANDLERS[_spec.program] = specified(_spec, _no_operands)
_HANDLERS["scontrol"] = _scontrol

SPECS = [SINFO, SQUEUE, SACCT, SSTAT, SPRIO, SSHARE, SDIAG, SCONTROL]
