"""Files: the read-only file and system-information tools (each on its option spec), the archive
listers tar and unzip, and rm, mv, cp, ln, chmod/chown, truncate, shred, dd, tee."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import (
    Effect,
    Parsed,
    Spec,
    _abbreviates,
    _getopt,
    _long_options,
    _operands,
    _short_options,
)
from agent.safety.classifier.paths import (
    _HARMLESS_SINKS,
    _system_dir_hit,
    _write_risk,
    normalize,
    pattern_read_risk,
    read_risk,
)
from agent.safety.classifier.registry import _HANDLERS, _handles, _handles_matching, judge_by_spec
from agent.safety.classifier.words import _may_become_option

# Programs whose options are all read-only: a glob that expands to an option cannot make them write,
# run a program or open another file (shell.py skips its glob check for them). Programs with an
# option that opens a file (grep -f, du --files0-from, jq --rawfile) or acts (who --lookup) are not here.
_FREE_ARGS = frozenset(
    {
        "ls", "cat", "head", "tail", "readlink", "realpath", "stat", "which", "whereis", "basename", "dirname",
        "cut", "tr", "column", "nl", "tac", "uname", "id", "whoami", "groups", "uptime", "free", "lsmod", "nproc",
        "printenv", "echo", "true", "false", "sleep", "test", "[", "pwd", "type", "cmp", "od", "ps", "pidof",
        "lsof", "getconf", "locale", "lsb_release", "arch", "tty", "w", "cd", ":",
    }
)

# Shell builtins (and `test`/`[`, judged elsewhere): their arguments do nothing but print or test.
_BUILTINS = ("echo", "true", "false", "pwd", "type", "cd", ":")  # test and [ are the interpreters family's


def _allow_free(an: Analysis, cmd: _Cmd) -> None:
    an.allow(cmd)


for _name in _BUILTINS:
    _HANDLERS[_name] = _allow_free


# --------------------------------------------------------------------------- reading files named by options

# Trees whose recursive reading reaches kernel files that are consumed or act when read (/proc/kmsg,
# trace_pipe) or device nodes (/dev/watchdog).
_HAZARD_TREES = ("/proc", "/sys", "/dev")


def _read_problem(an: Analysis, cmd: _Cmd, arg: Arg | None, what: str = "") -> bool:
    """Record why opening arg for reading is not read-only; True when it is not."""
    text = None if arg is None else arg.text
    problem = pattern_read_risk(text, an.cwd) if arg is not None and arg.pattern else read_risk(text, an.cwd)
    if problem is None:
        return False
    an.add(problem[0], f"{cmd.prog}:{problem[1]}", f"`{cmd.prog}`{what} reads {problem[2]}")
    return True


def _reads_ok(an: Analysis, cmd: _Cmd, args: list[Arg], what: str = "") -> bool:
    return not any(_read_problem(an, cmd, arg, what) for arg in args)


def _relative_patterns_ok(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """The registry reads a relative glob against `/`; read it against the working directory (`cd /dev; cat *`)."""
    return _reads_ok(an, cmd, [a for a in parsed.operands if a.pattern and not (a.text or "/").startswith("/")])


def _tree_ok(an: Analysis, cmd: _Cmd, arg: Arg | None, how: str) -> bool:
    """A directory the command reads every file below: not / nor anything in or above /proc, /sys, /dev."""
    text = None if arg is None else arg.text
    if text is not None and arg is not None and arg.pattern:
        fixed = re.split(r"[*?\[{]", text, maxsplit=1)[0]
        base = normalize(fixed.rsplit("/", 1)[0] if "/" in fixed else ".", an.cwd)
        risky = base is None or any(fnmatch.fnmatchcase(tree, posixpath.join(base, text.rsplit("/", 1)[-1]))
                                    or tree.startswith(base.rstrip("/") + "/") or base.startswith(tree)
                                    for tree in _HAZARD_TREES)
        if risky:
            an.add(MUTATING, f"{cmd.prog}:side-effect-read",
                   f"`{cmd.prog} {how}` over `{text}` may descend into /proc, /sys or /dev, where reading "
                   f"consumes kernel queues or arms devices")
            return False
        return True
    norm = None if text is None else normalize(text, an.cwd)
    if norm is None:
        an.add(MUTATING, f"{cmd.prog}:unknown-path", f"`{cmd.prog} {how}` reads a tree the classifier cannot resolve")
        return False
    if norm == "/" or any(norm == tree or norm.startswith(tree + "/") for tree in _HAZARD_TREES):
        an.add(MUTATING, f"{cmd.prog}:side-effect-read",
               f"`{cmd.prog} {how}` reads every file under {norm}, among them kernel files consumed when read "
               f"(/proc/kmsg, trace_pipe) or devices")
        return False
    return _reads_ok(an, cmd, [arg] if arg is not None else [])


def _fixed_option(arg: Arg) -> bool:
    """`--include=*.list`: whatever it expands to, it is this option with some value."""
    fixed = re.split(r"[*?\[{]", arg.text or "", maxsplit=1)[0]
    return fixed.startswith("-") and "=" in fixed


def _globs_ok(an: Analysis, cmd: _Cmd) -> bool:
    """For programs with options that open files: an unquoted glob may expand to such an option."""
    risky = next((a for a in cmd.args if _may_become_option(a) and not _fixed_option(a)), None)
    if risky is None:
        return True
    # Names made by a glob in the working directory hold no `/`: the options they could become read
    # files of that directory or recurse into it, harmless unless it is unknown or a kernel tree.
    cwd = an.cwd
    if cwd is not None and cwd != "/" and not any(cwd == t or cwd.startswith(t + "/") for t in _HAZARD_TREES):
        return True
    an.add(MUTATING, f"{cmd.prog}:glob-option",
           f"the unquoted pattern `{risky.text}` could expand to a file name that `{cmd.prog}` reads as an option")
    return False


_HELP_VERSION = "--help --version"


# --------------------------------------------------------------------------- coreutils and friends
# Unless a comment says otherwise, every option of these programs only selects or formats what they
# print. files=True: their operands are files they open for reading.

LS = Spec(
    "ls",
    "-a|--all -A|--almost-all --author -b|--escape --block-size= -B|--ignore-backups -c -C --color[=] "
    "-d|--directory -D|--dired -f -F|--classify[=] --file-type --format= --full-time -g "
    "--group-directories-first -G|--no-group -h|--human-readable --si -H|--dereference-command-line "
    "--dereference-command-line-symlink-to-dir --hide= --hyperlink[=] --indicator-style= -i|--inode "
    "-I|--ignore= -k|--kibibytes -l -L|--dereference -m -n|--numeric-uid-gid -N|--literal -o -p "
    "-q|--hide-control-chars --show-control-chars -Q|--quote-name --quoting-style= -r|--reverse "
    "-R|--recursive -s|--size -S --sort= --time= --time-style= -t -T|--tabsize= -u -U -v -w|--width= -x -X "
    "-Z|--context --zero -1 " + _HELP_VERSION,
)  # ls only stats and lists directories: it opens no file's contents
CAT = Spec("cat", "-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank -t "
                  "-T|--show-tabs -u -v|--show-nonprinting " + _HELP_VERSION, files=True)
HEAD = Spec("head", "-c|--bytes= -n|--lines= -q|--quiet|--silent -v|--verbose -z|--zero-terminated -NUM "
            + _HELP_VERSION, files=True)
TAIL = Spec(
    "tail",
    "-c|--bytes= -f|--follow[=]!follow -F!follow -n|--lines= --max-unchanged-stats= --pid= -q|--quiet|--silent "
    "--retry -s|--sleep-interval= -v|--verbose -z|--zero-terminated -NUM ---disable-inotify ---presume-input-pipe "
    + _HELP_VERSION,
    # a read that never ends holds the session; the sandbox's time limit would cut it off as a failure
    effects={"follow": Effect(MUTATING, "follows the file and never ends; read its last lines with `tail -n N`")},
    files=True,
)
WC = Spec(
    "wc",
    "-c|--bytes -m|--chars -l|--lines -L|--max-line-length -w|--words --total= --debug "
    "--files0-from=!list " + _HELP_VERSION,
    # The list names files the classifier cannot see: /dev/watchdog among them is opened too.
    effects={"list": Effect(MUTATING, "opens every file named in a list the classifier cannot read "
                                      "(a device among them would be opened too)")},
    files=True,
)
_GREP_OPTIONS = (
    "-E|--extended-regexp -F|--fixed-strings|--fixed-regexp -G|--basic-regexp -P|--perl-regexp -e|--regexp= "
    "-f|--file= -i|-y|--ignore-case --no-ignore-case -w|--word-regexp -x|--line-regexp -z|--null-data "
    "-s|--no-messages -v|--invert-match -V|--version --help -m|--max-count= -b|--byte-offset -n|--line-number "
    "--line-buffered -H|--with-filename -h|--no-filename --label= -o|--only-matching -q|--quiet|--silent "
    "--binary-files= -a|--text -I -d|--directories= -D|--devices= -r|--recursive -R|--dereference-recursive "
    "--include= --exclude= --exclude-from= --exclude-dir= -L|--files-without-match -l|--files-with-matches "
    "-c|--count -T|--initial-tab -Z|--null -B|--before-context= -A|--after-context= -C|--context= -NUM "
    "--group-separator= --no-group-separator --color|--colour[=] -U|--binary -u|--unix-byte-offsets"
)
GREP = Spec("grep", _GREP_OPTIONS, aliases=("egrep", "fgrep", "zgrep", "zegrep", "zfgrep"))  # z*: on gzip files


def _grep_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """The pattern files and the files searched; a recursive search must not reach /proc, /sys or /dev."""
    if not _globs_ok(an, cmd) or not _reads_ok(an, cmd, parsed.values("-f", "--exclude-from")):
        return False
    files = parsed.operands if parsed.has("-e", "-f") else parsed.operands[1:]
    recursive = parsed.has("-r", "-R") or any(v.text is None or "recurse".startswith(v.text or "-")
                                              for v in parsed.values("-d"))
    if recursive:
        return all(_tree_ok(an, cmd, arg, "-r") for arg in files or [Arg(".")])
    return _reads_ok(an, cmd, files)


READLINK = Spec("readlink", "-f|--canonicalize -e|--canonicalize-existing -m|--canonicalize-missing "
                            "-n|--no-newline -q|--quiet -s|--silent -v|--verbose -z|--zero " + _HELP_VERSION)
REALPATH = Spec("realpath", "-e|--canonicalize-existing -m|--canonicalize-missing -L|--logical -P|--physical "
                            "-q|--quiet --relative-to= --relative-base= -s|--strip|--no-symlinks -z|--zero "
                + _HELP_VERSION)
STAT = Spec("stat", "-L|--dereference -f|--file-system --cached= -c|--format= --printf= -t|--terse "
            + _HELP_VERSION)  # stat(2) and statfs(2) only: no file is opened
WHICH = Spec("which", "-a -s")  # debianutils which: a PATH search
WHEREIS = Spec("whereis", "-b -B= -m -M= -s -S= -f -u -l -h|--help -V|--version")
BASENAME = Spec("basename", "-a|--multiple -s|--suffix= -z|--zero " + _HELP_VERSION)
DIRNAME = Spec("dirname", "-z|--zero " + _HELP_VERSION)

# The checksum tools: `-c` opens every file its checksum list names, a list the classifier cannot see.
_CHECK = {"check": Effect(MUTATING, "opens every file the checksum list names, which the classifier cannot "
                                    "read (a device among them would be opened too)")}
_SUM_OPTIONS = ("-b|--binary -c|--check!check --tag -t|--text -z|--zero --ignore-missing --quiet --status "
                "--strict -w|--warn " + _HELP_VERSION)
SUMS = [Spec(name, _SUM_OPTIONS, effects=_CHECK, files=True)
        for name in ("md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum")]
B2SUM = Spec("b2sum", _SUM_OPTIONS + " -l|--length=", effects=_CHECK, files=True)
CKSUM = Spec("cksum", "-a|--algorithm= -c|--check!check -l|--length= --tag --untagged -z|--zero --ignore-missing "
                      "--quiet --status --strict -w|--warn --debug --base64 --raw -b|--binary -t|--text "
             + _HELP_VERSION, effects=_CHECK, files=True)
CUT = Spec("cut", "-b|--bytes= -c|--characters= -d|--delimiter= -f|--fields= -n -s|--only-delimited "
                  "-z|--zero-terminated --complement --output-delimiter= " + _HELP_VERSION, files=True)
TR = Spec("tr", "-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1 " + _HELP_VERSION)
COLUMN = Spec(
    "column",
    "-t|--table -n|--table-name= -O|--table-order= -N|--table-columns= -l|--table-columns-limit= "
    "-E|--table-noextreme= -d|--table-noheadings -e|--table-header-repeat -H|--table-hide= -R|--table-right= "
    "-T|--table-truncate= -W|--table-wrap= -L|--keep-empty-lines -J|--json -r|--tree= -i|--tree-id= "
    "-p|--tree-parent= -c|--output-width= -o|--output-separator= -s|--separator= -x|--fillrows -h|--help "
    "-V|--version",
    files=True,
)  # -o is the output column separator, not a file
NL = Spec("nl", "-b|--body-numbering= -d|--section-delimiter= -f|--footer-numbering= -h|--header-numbering= "
                "-i|--line-increment= -l|--join-blank-lines= -n|--number-format= -p|--no-renumber "
                "-s|--number-separator= -v|--starting-line-number= -w|--number-width= " + _HELP_VERSION, files=True)
TAC = Spec("tac", "-b|--before -r|--regex -s|--separator= " + _HELP_VERSION, files=True)
UNAME = Spec("uname", "-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release -v|--kernel-version "
                      "-m|--machine -p|--processor -i|--hardware-platform -o|--operating-system " + _HELP_VERSION)
ID = Spec("id", "-a -Z|--context -g|--group -G|--groups -n|--name -r|--real -u|--user -z|--zero " + _HELP_VERSION)
WHOAMI = Spec("whoami", _HELP_VERSION)
GROUPS = Spec("groups", _HELP_VERSION)
UPTIME = Spec("uptime", "-p|--pretty -s|--since -r|--raw -c|--container -h|--help -V|--version")
DF = Spec(
    "df",
    "-a|--all -B|--block-size= -h|--human-readable -H|--si -i|--inodes -k -l|--local --no-sync --output[=] "
    "-P|--portability -t|--type= -T|--print-type -x|--exclude-type= -v --total --sync!sync " + _HELP_VERSION,
    # sync(2) flushes every file system's pending writes first: it can stall on a hung mount.
    effects={"sync": Effect(MUTATING, "calls sync(2) first, flushing every file system's pending writes")},
)
DU = Spec(
    "du",
    "-0|--null -a|--all --apparent-size -B|--block-size= -b|--bytes -c|--total -D|-H|--dereference-args "
    "-d|--max-depth= --files0-from= -h|--human-readable --inodes -k -L|--dereference -l|--count-links -m "
    "-P|--no-dereference -S|--separate-dirs --si -s|--summarize -t|--threshold= --time[=] --time-style= "
    "-X|--exclude-from= --exclude= -x|--one-file-system " + _HELP_VERSION,
)  # du only stats what it counts; the list files of --files0-from and -X are read (checked below)


def _du_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return _globs_ok(an, cmd) and _reads_ok(an, cmd, parsed.values("--files0-from", "-X"))


FREE = Spec("free", "-b|--bytes --kilo --mega --giga --tera --peta -k|--kibi -m|--mebi -g|--gibi --tebi --pebi "
                    "-h|--human --si -l|--lohi -L|--line -t|--total -v|--committed -s|--seconds= -c|--count= "
                    "-w|--wide --help -V|--version")
LSCPU = Spec("lscpu", "-a|--all -b|--online -B|--bytes -C|--caches[=] -c|--offline -J|--json -e|--extended[=] "
                      "-p|--parse[=] -s|--sysroot= -x|--hex -y|--physical --output-all -r|--raw -h|--help "
                      "-V|--version")
LSBLK = Spec(
    "lsblk",
    "-A|--noempty -D|--discard -E|--dedup= -I|--include= -J|--json -M|--merge -O|--output-all -P|--pairs "
    "-S|--scsi -N|--nvme -v|--virtio -T|--tree[=] -a|--all -b|--bytes -d|--nodeps -e|--exclude= -f|--fs "
    "-i|--ascii -l|--list -m|--perms -n|--noheadings -o|--output= -p|--paths -r|--raw -s|--inverse "
    "-t|--topology -w|--width= -x|--sort= -y|--shell -z|--zoned -Q|--filter= -H|--list-columns --ct= "
    "--ct-filter= --highlight= --properties-by= --sysroot= -h|--help -V|--version",
)


def _sysroot_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """--sysroot DIR reads DIR/proc/... and DIR/sys/... in place of the real ones."""
    return _globs_ok(an, cmd) and all(_tree_ok(an, cmd, v, "--sysroot") for v in parsed.values("--sysroot"))


# lspci (pciutils) is not installed here; its options from lspci(8).
LSPCI = Spec(
    "lspci",
    "-m -t -v -k -x -b -D -P -n -s= -d= -i= -p= -G -J --version "
    "-q!dns -Q!dns -M!busmap -A=!method -O=!param -H=!direct -F=",
    effects={
        # -q/-Q look unknown IDs up in DNS and cache the answers in ~/.pciids-cache.
        "dns": Effect(MUTATING, "queries DNS for unknown device IDs and writes the answers to ~/.pciids-cache"),
        "busmap": Effect(MUTATING, "probes every possible bus address, including devices behind misconfigured "
                                   "bridges"),
        "method": Effect(MUTATING, "picks the access method, such as direct port I/O to the PCI configuration "
                                   "ports"),
        "param": Effect(MUTATING, "sets an access parameter (access method, cache file, dump file)"),
        "direct": Effect(MUTATING, "bypasses the kernel and pokes the PCI configuration ports directly"),
    },
    help=(),
)


def _lspci_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if sum(1 for u in parsed.used if u.option.names == ("-x",)) >= 3:
        an.add(MUTATING, "lspci:-xxx", "`lspci -xxx` reads the whole configuration space, which crashes some devices")
        return False
    return _globs_ok(an, cmd) and _reads_ok(an, cmd, parsed.values("-F", "-i", "-p"))


LSMOD = Spec("lsmod", "", help=())  # kmod's lsmod takes no options
NPROC = Spec("nproc", "--all --ignore= " + _HELP_VERSION)
PRINTENV = Spec("printenv", "-0|--null " + _HELP_VERSION)
SLEEP = Spec("sleep", _HELP_VERSION)
JQ = Spec(
    "jq",
    # --arg NAME VALUE and friends take two words: the spec reads NAME, and VALUE (or FILE) is left
    # among the operands, where it is checked like an input file.
    "--seq --stream --stream-errors -s|--slurp -R|--raw-input -n|--null-input -c|--compact-output --tab "
    "--indent= -C|--color-output -M|--monochrome-output -a|--ascii-output --unbuffered -S|--sort-keys "
    "-r|--raw-output --raw-output0 -j|--join-output -0|--nul-output -f|--from-file -L= -e|--exit-status "
    "--arg= --argjson= --slurpfile= --rawfile= --argfile= --args --jsonargs --run-tests "
    "--debug-dump-disasm --debug-trace[=] -h|--help -V|--version --build-configuration -b|--binary",
    style="exact",
)


def _jq_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """Every input file, and the files of --slurpfile/--rawfile; the filter is skipped only when it is
    surely the first operand."""
    if not _globs_ok(an, cmd):
        return False
    paired = parsed.has("--arg", "--argjson", "--slurpfile", "--rawfile", "--argfile", "-f", "--run-tests")
    return _reads_ok(an, cmd, parsed.operands if paired else parsed.operands[1:])


DIFF = Spec(
    "diff",
    "--normal -q|--brief -s|--report-identical-files -c -C= --context[=] -u -U= --unified[=] -e|--ed -n|--rcs "
    "-y|--side-by-side -W|--width= --left-column --suppress-common-lines -p|--show-c-function "
    "-F|--show-function-line= --label= -t|--expand-tabs -T|--initial-tab --tabsize= --suppress-blank-empty "
    "-r|--recursive --no-dereference -N|--new-file --unidirectional-new-file --ignore-file-name-case "
    "--no-ignore-file-name-case -x|--exclude= -X|--exclude-from= -S|--starting-file= --from-file= --to-file= "
    "-i|--ignore-case -E|--ignore-tab-expansion -Z|--ignore-trailing-space -b|--ignore-space-change "
    "-w|--ignore-all-space -B|--ignore-blank-lines -I|--ignore-matching-lines= -a|--text --strip-trailing-cr "
    "-D|--ifdef= --old-group-format= --new-group-format= --unchanged-group-format= --changed-group-format= "
    "--line-format= --old-line-format= --new-line-format= --unchanged-line-format= -d|--minimal "
    "--horizon-lines= --speed-large-files --color[=] --palette= --help -v|--version -H --binary "
    "-l|--paginate!pager",
    # -l pipes the output through pr, another program.
    effects={"pager": Effect(MUTATING, "pipes the output through another program (pr)")},
    not_options="--GTYPE-group-format --LTYPE-line-format",
)


def _diff_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if not _globs_ok(an, cmd) or not _reads_ok(an, cmd, parsed.values("-X")):
        return False
    files = parsed.operands + parsed.values("--from-file", "--to-file")
    if parsed.has("-r"):
        return all(_tree_ok(an, cmd, arg, "-r") for arg in files)
    return _reads_ok(an, cmd, files)


CMP = Spec("cmp", "-b|--print-bytes -i|--ignore-initial= -l|--verbose -n|--bytes= -s|--quiet|--silent --help "
                  "-v|--version", files=True)
OD = Spec(
    "od",
    "-A|--address-radix= --endian= -j|--skip-bytes= -N|--read-bytes= -S|--strings[=] -t|--format= "
    "-v|--output-duplicates -w|--width[=] --traditional -a -b -c -d -D -e -f -F -h -H -i -I -l -L -o -O -s -x -X "
    + _HELP_VERSION,
    files=True,
)
STRINGS = Spec(
    "strings",
    "-a|--all -d|--data -f|--print-file-name -n|--bytes= -t|--radix= -w|--include-all-whitespace -o "
    "-T|--target= -e|--encoding= --unicode= -U= -s|--output-separator= -h|--help -v|-V|--version -NUM",
    files=True,
)


def _strings_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """binutils reads more arguments from `@FILE`."""
    responses = [Arg(a.text[1:], a.pattern) for a in parsed.operands if (a.text or "").startswith("@")]
    return _globs_ok(an, cmd) and _reads_ok(an, cmd, responses) and _relative_patterns_ok(an, cmd, parsed)


PS = Spec(
    "ps",
    # BSD options (`ps aux`) are operands here; none of ps's options writes or runs anything.
    "-A|-e -a -d -N|--deselect -C= -G|--Group= -g|--group= -p|--pid= --ppid= -q|--quick-pid= -s|--sid= "
    "-t|--tty= -u|--user= -U|--User= -F -f -H -j -l -M -O= -o|--format= -P -y -c -L -m -T -V|--version -w "
    "-Z --context --headers --no-headers --cols|--columns|--width= --rows|--lines= --cumulative --forest "
    "--sort= --info -n= -X -D= --signames --help[=]",
    style="exact",
    help=(("--help", "all"),),
)
PGREP = Spec(
    "pgrep",
    "-d|--delimiter= -l|--list-name -a|--list-full -v|--inverse -w|--lightweight -c|--count -f|--full "
    "-g|--pgroup= -G|--group= -i|--ignore-case -n|--newest -o|--oldest -O|--older= -P|--parent= "
    "-s|--session= -t|--terminal= -u|--euid= -U|--uid= -x|--exact -F|--pidfile= -L|--logpidfile "
    "-r|--runstates= -A|--ignore-ancestors --cgroup= --ns= --nslist= -h|--help -V|--version",
)


def _pgrep_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return _globs_ok(an, cmd) and _reads_ok(an, cmd, parsed.values("-F"))


PIDOF = Spec("pidof", "-c -d= -h -n -o= -q -s -x -S= -V --help --version", help=(("-h",),))
LSOF = Spec(
    "lsof",
    # `+D DIR`, `+c W` and the other `+` forms are read as names; lsof only stats the names it is given.
    "-? -h -a -b -c= -d= -E -F[=] -g[=] -i[=] -K[=] -l -L[=] -m= -M -n -N -o[=] -O -p= -P -Q -r[=] -R -s[=] "
    "-S[=] -t -T[=] -u= -U -v -V -w -x[=] -X -Z[=] -e= -f[=]",
    help=(("-h",),),
)


def _lsof_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """-m FILE (and `+m FILE`) reads a mount supplement file."""
    texts = cmd.texts
    supplements = [cmd.args[i + 1] for i, t in enumerate(texts[:-1]) if t == "+m"]
    return _reads_ok(an, cmd, parsed.values("-m") + supplements)


GETCONF = Spec("getconf", "-a -v= --help --version")
LOCALE = Spec("locale", "-a|--all-locales -m|--charmaps -c|--category-name -k|--keyword-name -v|--verbose "
                        "-?|--help --usage -V|--version")
LSB_RELEASE = Spec("lsb_release", "-v|--version -i|--id -d|--description -r|--release -c|--codename -a|--all "
                                  "-s|--short -h|--help", style="optparse")
ARCH = Spec("arch", _HELP_VERSION)
TTY = Spec("tty", "-s|--silent|--quiet " + _HELP_VERSION)
W = Spec("w", "-h|--no-header -u|--no-current -s|--short -f|--from -o|--old-style -i|--ip-addr -p|--pids "
              "--help -V|--version")
WHO = Spec(
    "who",
    "-a|--all -b|--boot -d|--dead -H|--heading --ips -l|--login -m -p|--process -q|--count -r|--runlevel "
    "-s|--short -t|--time -T|-w|--mesg|--message|--writable -u|--users --lookup!dns " + _HELP_VERSION,
    effects={"dns": Effect(MUTATING, "looks the login hosts up in DNS, reaching other hosts")},
)


def _who_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """`who FILE` reads FILE as a login record; `who am i` names no file."""
    return len(parsed.operands) != 1 or _reads_ok(an, cmd, parsed.operands)


def _files_only(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return _relative_patterns_ok(an, cmd, parsed)


def _known(cmd: _Cmd) -> _Cmd:
    """The words known before the command runs: the shell analysis already finds the others (`ls $(date)`
    needs approval for its substitution), and its rule says why better than an unknown option would."""
    return _Cmd(cmd.name, cmd.prog, [a for a in cmd.args if a.text is not None], cmd.stdin)


def spec_handler(spec: Spec, operands=None):
    def handler(an: Analysis, cmd: _Cmd) -> None:
        judge_by_spec(an, _known(cmd), spec, operands)

    return handler


def _register(spec: Spec, operands=None) -> None:
    for name in spec.aliases:
        _HANDLERS[name] = spec_handler(spec, operands)


for _spec in (CAT, HEAD, TAIL, WC, CUT, COLUMN, NL, TAC, CMP, OD, *SUMS, B2SUM, CKSUM):
    _register(_spec, _files_only)
for _spec in (LS, READLINK, REALPATH, STAT, WHICH, WHEREIS, BASENAME, DIRNAME, TR, UNAME, ID, WHOAMI, GROUPS,
              UPTIME, DF, FREE, LSMOD, NPROC, PRINTENV, SLEEP, PS, PIDOF, GETCONF, LOCALE, LSB_RELEASE, ARCH,
              TTY, W):
    _register(_spec)
_register(GREP, _grep_operands)
_register(DU, _du_operands)
_register(LSCPU, _sysroot_operands)
_register(LSBLK, _sysroot_operands)
_register(LSPCI, _lspci_operands)
_register(JQ, _jq_operands)
_register(DIFF, _diff_operands)
_register(STRINGS, _strings_operands)
_register(PGREP, _pgrep_operands)
_register(LSOF, _lsof_operands)
_register(WHO, _who_operands)


@_handles("tee")
def _tee(an: Analysis, cmd: _Cmd) -> None:
    targets = _operands(cmd.args)
    risky = [t for t in targets if t.text not in _HARMLESS_SINKS]
    for target in risky:
        an.write(target, "`tee`", "tee")
    if not risky:
        an.allow(cmd)


@_handles("rm")
def _rm(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    if any(n == "--no-preserve-root" or _abbreviates(n, "--no-preserve-root", 6) for n in longs):
        an.add(FORBIDDEN, "forbidden:rm-root", "`rm --no-preserve-root` is only ever used to delete the whole filesystem")
        return
    recursive = bool(shorts & {"r", "R"}) or any(n == "--recursive" or _abbreviates(n, "--recursive", 5) for n in longs)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            what = "the root filesystem" if hit == "/" else f"the system directory {hit}"
            an.add(FORBIDDEN, "forbidden:rm-system-dir", f"`rm -r {target.text}` wipes {what}")
            return
    targets = [t.text for t in _operands(cmd.args) if t.text]
    shown = ", ".join(targets[:3]) + (", ..." if len(targets) > 3 else "") if targets else "files"
    an.add(DESTRUCTIVE, "destructive:rm", f"`rm` deletes {shown}")


def _recursive_owner_change(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    recursive = "R" in shorts or "--recursive" in _long_options(cmd.args)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            an.add(
                FORBIDDEN,
                f"forbidden:{cmd.prog}-system-dir",
                f"`{cmd.prog} -R` on {target.text} changes the permissions or owner of a whole system directory",
            )
            return
    an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` changes file permissions or ownership")


for _name in ("chmod", "chown", "chgrp", "chattr", "setfacl"):
    _HANDLERS[_name] = _recursive_owner_change


@_handles("mv")
def _mv(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    for source in operands[:-1]:
        hit = _system_dir_hit(source)
        if hit is not None:
            an.add(FORBIDDEN, "forbidden:mv-system-dir", f"`mv {source.text}` moves the system directory {hit} away")
            return
    if operands:
        _destination_check(an, cmd, operands[-1])
    an.add(DESTRUCTIVE, "destructive:mv", "`mv` can replace or remove files at its destination")


def _destination_check(an: Analysis, cmd: _Cmd, target: Arg) -> None:
    if target.text is not None:
        risk = _write_risk(target.text)
        if risk is not None and risk[0].rank >= DESTRUCTIVE.rank:
            an.write(target, f"`{cmd.prog}`", cmd.prog)


@_handles("cp", "install", "rsync")
def _copy(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    if len(operands) >= 2:
        _destination_check(an, cmd, operands[-1])
    if cmd.prog == "rsync" and any(n.startswith("--del") or n == "--remove-source-files" for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "rsync:--delete", "`rsync --delete` deletes files at the destination")
    else:
        an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` writes files")


@_handles("ln")
def _ln(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    operands = _operands(cmd.args)
    target_dirs = [a.text for a in _getopt(cmd.args, short_value="tS", long_value={"--target-directory",
                                                                                   "--suffix"}).values("-t")]
    link = operands[-1].text if len(operands) >= 2 and not target_dirs else None
    if "f" in shorts or "--force" in longs:
        an.add(DESTRUCTIVE, "ln:-f", "`ln -f` replaces an existing file or link")
    elif link is not None and posixpath.normpath(link) == "/usr/local/cuda":
        an.add(DESTRUCTIVE, "ln:/usr/local/cuda", "`ln` onto /usr/local/cuda replaces the link that selects the toolkit")
    else:
        an.add(MUTATING, "mutating:ln", "`ln` creates a new link")


@_handles("truncate")
def _truncate(an: Analysis, cmd: _Cmd) -> None:
    for target in _operands(cmd.args):
        _destination_check(an, cmd, target)
    an.add(DESTRUCTIVE, "destructive:truncate", "`truncate` cuts files to a new size, discarding data")


@_handles("shred")
def _shred(an: Analysis, cmd: _Cmd) -> None:
    if any((t.text or "").startswith("/dev/") for t in _operands(cmd.args)):
        an.add(FORBIDDEN, "forbidden:shred", "`shred` on a device overwrites the whole disk")
    else:
        an.add(DESTRUCTIVE, "destructive:shred", "`shred` overwrites and destroys files")


@_handles("dd")
def _dd(an: Analysis, cmd: _Cmd) -> None:
    for text in cmd.texts:
        if text and text.startswith("of="):
            target = text[3:]
            risk = _write_risk(target)
            if target.startswith("/dev/") and risk is not None:
                an.add(FORBIDDEN, "forbidden:dd", f"`dd of={target}` writes raw data onto a device")
            elif risk is not None and risk[0] is DESTRUCTIVE:
                an.write(Arg(target), "`dd`", "dd")
    an.add(MUTATING, "mutating:dd", "`dd` copies raw data and writes it to its output")


@_handles_matching(r"mkfs.*")
@_handles("mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "wipefs", "blkdiscard")
def _wipe_filesystem(an: Analysis, cmd: _Cmd) -> None:
    family = "mkfs" if cmd.prog.startswith(("mkfs", "mke2fs", "mkdosfs", "mkntfs")) else cmd.prog
    an.add(FORBIDDEN, f"forbidden:{family}", f"`{cmd.prog}` erases a filesystem or a whole device")


# --------------------------------------------------------------------------- archives
# tar and unzip only list, test or print in the forms below; every other mode writes files and keeps
# the rules `mutating:tar` / `mutating:unzip`.

TAR = Spec(
    "tar",
    # modes
    "-A|--catenate|--concatenate -c|--create -d|--diff|--compare --delete -r|--append -t|--list --test-label "
    "-u|--update -x|--extract|--get --show-defaults --usage -?|--help --version "
    # operation modifiers
    "--check-device --no-check-device -G|--incremental!incremental -g|--listed-incremental=!incremental "
    "--hole-detection= --ignore-failed-read --level= -n|--seek --no-seek --occurrence[=] --restrict "
    "--sparse-version= -S|--sparse "
    # overwrite control (extraction only, a mutating mode anyway)
    "-k|--keep-old-files --keep-newer-files --keep-directory-symlink --no-overwrite-dir --one-top-level[=] "
    "--overwrite --overwrite-dir --recursive-unlink --remove-files!remove --skip-old-files -U|--unlink-first "
    "-W|--verify "
    # output stream
    "--ignore-command-error --no-ignore-command-error -O|--to-stdout --to-command=!exec "
    # metadata
    "--atime-preserve[=] --clamp-mtime --delay-directory-restore --no-delay-directory-restore --group= "
    "--group-map= --mode= --mtime= -m|--touch --no-same-owner --no-same-permissions --numeric-owner --owner= "
    "--owner-map= -p|--preserve-permissions|--same-permissions --same-owner -s|--preserve-order|--same-order "
    "--sort= --acls --no-acls --selinux --no-selinux --xattrs --no-xattrs --xattrs-exclude= --xattrs-include= "
    # device selection and switching
    "--force-local -f|--file= -F|--info-script|--new-volume-script=!exec -L|--tape-length= "
    "-M|--multi-volume!volumes --rmt-command=!exec --rsh-command=!exec --volno-file=!write "
    # blocking
    "-b|--blocking-factor= -B|--read-full-records -i|--ignore-zeros --record-size= "
    # archive format
    "-H|--format= --old-archive|--portability --pax-option= --posix -V|--label= "
    # compression: the system's gzip, bzip2, xz... ; -I names any program
    "-a|--auto-compress --no-auto-compress -I|--use-compress-program=!exec -j|--bzip2 -J|--xz --lzip --lzma "
    "--lzop --no-null -z|--gzip|--gunzip|--ungzip -Z|--compress|--uncompress --zstd "
    # local file selection
    "--add-file= --backup[=] -C|--directory= --exclude= --exclude-backups --exclude-caches --exclude-caches-all "
    "--exclude-caches-under --exclude-ignore= --exclude-ignore-recursive= --exclude-tag= --exclude-tag-all= "
    "--exclude-tag-under= --exclude-vcs --exclude-vcs-ignores -h|--dereference --hard-dereference "
    "-K|--starting-file= --newer-mtime= --no-null --no-recursion --no-unquote --no-verbatim-files-from --null "
    "-N|--newer|--after-date= --one-file-system -P|--absolute-names --recursion --suffix= -T|--files-from= "
    "--unquote --verbatim-files-from -X|--exclude-from= "
    # name matching and transformations
    "--anchored --ignore-case --no-anchored --no-ignore-case --no-wildcards --no-wildcards-match-slash "
    "--wildcards --wildcards-match-slash --strip-components= --transform|--xform= "
    # informative output
    "--checkpoint[=] --checkpoint-action=!exec --full-time --index-file=!write -l|--check-links "
    "--no-quote-chars= --quote-chars= --quoting-style= -R|--block-number --show-omitted-dirs "
    "--show-transformed-names|--show-stored-names --show-snapshot-field-ranges --totals[=] --utc -v|--verbose "
    "--warning= -w|--interactive|--confirmation -o",
    effects={
        "exec": Effect(MUTATING, "runs another program"),  # also in list mode (checkpoint actions, -I, rsh)
        "write": Effect(MUTATING, "writes a file"),
        "incremental": Effect(MUTATING, "reads or rewrites an incremental snapshot file"),
        "volumes": Effect(MUTATING, "prompts for the next volume, where a shell can be spawned"),
        "remove": Effect(DESTRUCTIVE, "deletes the files it archives"),
    },
    not_options="--format=gnu --format=posix --format=v7",
)
_TAR_VALUE_LETTERS = "gCTXfFLbHVIKN"  # letters of the old form (`tar tvf A`) that take the next word


def _tar_args(args: list[Arg]) -> list[Arg]:
    """`tar tzf A.tgz` in the dash form (`-t -z -f A.tgz`) the spec reads."""
    if not args or args[0].text is None or args[0].text.startswith("-"):
        return args
    converted, rest = [], list(args[1:])
    for letter in args[0].text:
        converted.append(Arg("-" + letter))
        if letter in _TAR_VALUE_LETTERS and rest:
            converted.append(rest.pop(0))
    return converted + rest


_TAR_MODES = ("-A", "-c", "-d", "--delete", "-r", "-t", "--test-label", "-u", "-x")


@_handles("tar")
def _tar(an: Analysis, cmd: _Cmd) -> None:
    cmd = _Cmd(cmd.name, cmd.prog, _tar_args(_known(cmd).args), cmd.stdin)
    judge_by_spec(an, cmd, TAR, _tar_operands)


def _tar_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """Read-only: --list (or --test-label) of an archive file that is not on another host."""
    modes = {mode for mode in _TAR_MODES if parsed.has(mode)}
    if not modes and parsed.has("--help", "--version", "--usage", "--show-defaults"):
        return True
    if not modes <= {"-t", "--test-label"} or not modes:
        an.add(MUTATING, "mutating:tar", "`tar` creates or unpacks archives, writing files")
        return False
    archives = parsed.values("-f")
    if not archives and cmd.stdin is None:
        an.add(MUTATING, "tar:archive", "`tar` without -f reads the archive named by $TAPE, which cannot be known here")
        return False
    for archive in archives:
        text = archive.text or ""
        if ":" in text.split("/", 1)[0] and not parsed.has("--force-local"):
            an.add(MUTATING, "tar:remote", f"`tar -f {text}` opens the archive on another host through rsh")
            return False
    return (_globs_ok(an, cmd) and _reads_ok(an, cmd, [a for a in archives if a.text != "-"])
            and _reads_ok(an, cmd, parsed.values("-T", "-X", "--owner-map", "--group-map")))  # read while parsing


UNZIP = Spec(
    "unzip",
    # modes: -l -v list, -t tests, -p and -c print to stdout, -z prints the comment, -Z is zipinfo;
    # without one of them unzip extracts. -T sets the archive's time, -d creates the directory.
    "-Z -l -v -t -p -c -z -f -u -T!timestamp -d=!exdir -x -a -b -B -C -D -E -F -i -j -J -K -L -M -n -N -o "
    "-P= -q -s -S -U -V -W -X -Y -2 -O= -I= -h -$ -: -^",
    effects={"timestamp": Effect(MUTATING, "sets the archive's modification time"),
             "exdir": Effect(MUTATING, "creates the extraction directory")},
    help=(("-h",),), permute=False,  # after the archive only -d and -x are options; the rest name members
)
# zipinfo (`unzip -Z`): every option only chooses what the listing shows.
ZIPINFO = Spec("zipinfo", "-Z -1 -2 -s -m -l -v -h -M -t -T -z -C -x -O= -I=", help=())
_UNZIP_READING_MODES = ("-l", "-v", "-t", "-p", "-c")


@_handles("unzip")
def _unzip(an: Analysis, cmd: _Cmd) -> None:
    zipinfo = bool(cmd.args) and (cmd.args[0].text or "").startswith("-Z")
    judge_by_spec(an, _known(cmd), ZIPINFO if zipinfo else UNZIP, _unzip_operands)


def _unzip_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    # Info-ZIP has no `--`: a `-` inside options negates what follows (`unzip -l -- -l A` cancels -l and
    # extracts), and a word starting with `-` after the archive is a member to extract (`unzip A -l`).
    negation = next((a.text for a in cmd.args if a.text == "--" or (a.text or "").startswith("-")
                     and "-" in (a.text or "")[1:]), None)
    late_words = parsed.operands[1:]
    if any((a.text or "").startswith("-d") for a in late_words):
        an.add(MUTATING, "unzip:-d", "`unzip -d` (after the archive too) creates the extraction directory")
        return False
    late = next((a.text for a in late_words if (a.text or "-").startswith("-") and not (a.text or "").startswith("-x")),
                None)
    if negation is not None or late is not None:
        an.add(MUTATING, "mutating:unzip", f"`unzip` with `{negation or late}`: Info-ZIP reads it as a negated option "
                                           f"or a member to extract, so it unpacks")
        return False
    if not parsed.has("-Z", *_UNZIP_READING_MODES):
        an.add(MUTATING, "mutating:unzip", "`unzip` unpacks an archive, writing files")
        return False
    return _reads_ok(an, cmd, parsed.operands[:1])  # the archive; the rest name its members


SPECS = [LS, CAT, HEAD, TAIL, WC, GREP, READLINK, REALPATH, STAT, WHICH, WHEREIS, BASENAME, DIRNAME, *SUMS, B2SUM,
         CKSUM, CUT, TR, COLUMN, NL, TAC, UNAME, ID, WHOAMI, GROUPS, UPTIME, DF, DU, FREE, LSCPU, LSBLK, LSPCI, LSMOD,
         NPROC, PRINTENV, SLEEP, JQ, DIFF, CMP, OD, STRINGS, PS, PGREP, PIDOF, LSOF, GETCONF, LOCALE, LSB_RELEASE,
         ARCH, TTY, W, WHO, TAR, UNZIP, ZIPINFO]
