"""Operating-system packages: apt, dpkg, rpm/dnf/yum, update-alternatives, ldconfig, ubuntu-drivers."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec, _operands
from agent.safety.classifier.registry import _HANDLERS, _handles, files_read_ok, judge_by_spec

_APT_READ = frozenset({"list", "show", "search", "policy", "depends", "rdepends", "madison", "showsrc", "showpkg",
                       "pkgnames", "stats", "unmet", "dump", "dumpavail"})
_APT_DESTRUCTIVE = frozenset({"remove", "purge", "autoremove", "autopurge", "dist-upgrade", "full-upgrade"})
# Packages that install or replace the NVIDIA kernel driver (the `cuda` metapackages pull it in too).
_DRIVER_PACKAGE = re.compile(
    r"^(nvidia-driver|nvidia-open|nvidia-dkms|nvidia-kernel|nvidia-headless|nvidia-utils|libnvidia-compute|"
    r"cuda-drivers|linux-modules-nvidia|linux-image|kmod-nvidia|akmod-nvidia|xorg-x11-drv-nvidia)|^cuda(-\d+-\d+)?$"
)
_DRIVER_SAMPLES = ("nvidia-driver-580", "nvidia-open-580", "cuda-drivers", "cuda", "cuda-13-0", "nvidia-dkms-580")


def _is_driver_package(arg: Arg) -> bool:
    if arg.text is None:
        return False
    name = re.split(r"[=:]", arg.text, maxsplit=1)[0]
    if arg.pattern:
        return any(fnmatch.fnmatchcase(sample, name) for sample in _DRIVER_SAMPLES)
    return bool(_DRIVER_PACKAGE.match(name))


# --------------------------------------------------------------------------- APT
#
# APT's CommandLine parser: long options by their full names only, `--no-NAME` and `--NAME=no` for
# every boolean, short options clustered. A boolean written with a value (`--dry-run=no`) or negated
# (`--no-simulate`) is left out of the specs, so it is an unknown option: simulating only counts when
# it is plainly on. `-o` and `-c` set any configuration item, including hooks that run commands
# (APT::Update::Pre-Invoke, DPkg::Pre-Invoke) and the paths of the caches apt writes.
_APT_CONFIG = "-c|--config-file=!config -o|--option=!config "
_APT_EFFECTS = {"config": Effect(MUTATING, "sets APT options, which can run hook commands or move the files APT "
                                           "writes")}
_APT_COMMON = "-h|--help -v|--version -q|--quiet -t|--target-release|--default-release= -a|--host-architecture= "
_APT_GET_OPTIONS = (
    _APT_CONFIG + _APT_COMMON
    + "-s|--simulate|--just-print|--dry-run|--recon|--no-act -y|--yes|--assume-yes --assume-no -f|--fix-broken "
    "-m|--ignore-missing|--fix-missing -u|--show-upgraded --no-show-upgraded -b|--compile|--build "
    "-d|--download-only --no-download -V|--verbose-versions --purge --reinstall --allow-downgrades "
    "--allow-remove-essential --allow-change-held-packages --allow-unauthenticated --allow-insecure-repositories "
    "--allow-releaseinfo-change --no-install-recommends --install-recommends --no-install-suggests "
    "--install-suggests --only-upgrade --no-upgrade --ignore-hold --no-remove --auto-remove|--autoremove "
    "--trivial-only --force-yes --print-uris --list-cleanup --no-list-cleanup --arch-only --indep-only "
    "-P|--build-profiles= --with-source= --solver= --diff-only --dsc-only --tar-only --mark-auto --fix-policy "
    "--show-progress --no-new-pkgs --with-new-pkgs "
)
APT_GET = Spec("apt-get", _APT_GET_OPTIONS, style="exact", effects=_APT_EFFECTS, aliases=("aptitude",))
_APT_CACHE_QUERY = ("-i|--important -a|--all-versions -g|--generate --no-generate -n|--names-only -f|--full "
                    "--installed --recurse --no-pre-depends --no-depends --no-recommends --no-suggests "
                    "--no-conflicts --no-breaks --no-replaces --no-enhances --implicit --no-implicit ")
APT_CACHE = Spec(
    "apt-cache",
    _APT_CONFIG + _APT_COMMON + _APT_CACHE_QUERY + "--with-source= -p|--pkg-cache=!cache -s|--src-cache=!cache",
    style="exact",
    # the red team saw apt-cache write a 37 MB binary cache over the file these name
    effects={**_APT_EFFECTS, "cache": Effect(MUTATING, "writes APT's binary package cache to the file it names")},
)
APT = Spec("apt", _APT_GET_OPTIONS + _APT_CACHE_QUERY.replace("-a|--all-versions ", "--all-versions ")
           .replace("-f|--full ", "--full ") + "--upgradable --manual-installed", style="exact",
           effects=_APT_EFFECTS)
# `apt-get -s install ...` only prints what it would do, whatever the subcommand does for real.
_APT_SIMULATED = frozenset({"install", "reinstall", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade",
                            "autoremove", "autopurge", "build-dep", "satisfy", "check", "markauto", "unmarkauto"})


def _apt_plain_booleans(parsed: Parsed) -> str | None:
    """A flag written with a value: `--dry-run=no` turns simulation off."""
    return next((u.written for u in parsed.used if u.option.arity == "none" and u.value is not None), None)


@_handles("apt", "apt-get", "apt-cache", "aptitude")
def _apt(an: Analysis, cmd: _Cmd) -> None:
    spec = {"apt-cache": APT_CACHE, "apt": APT}.get(cmd.prog, APT_GET)
    parsed = spec.parse(cmd.args)
    sub_arg = parsed.operands[0] if parsed.operands else None
    sub = sub_arg.text if sub_arg is not None else None
    packages = parsed.operands[1:]
    valued = _apt_plain_booleans(parsed)
    simulated = cmd.prog != "apt-cache" and parsed.has("-s") and not parsed.unknown and valued is None
    reading = sub in _APT_READ and (cmd.prog != "apt-cache" or sub != "gencaches")
    if (reading or (simulated and sub in _APT_SIMULATED)) and not parsed.effects and not parsed.unknown \
            and valued is None and not (sub_arg is not None and sub_arg.pattern):
        judge_by_spec(an, cmd, spec, None, f"{cmd.prog} {sub}")
    elif reading and any(u.option.effect == "config" for u in parsed.effects):
        an.add(MUTATING, f"{cmd.prog}:-o", f"`{cmd.prog} -o/-c` sets APT options, which can run hook commands")
    elif reading and valued is not None and not parsed.unknown:
        an.add(MUTATING, f"{cmd.prog}:unknown-option", f"`{cmd.prog} {valued}`: APT reads a flag with a value as a "
                                                        f"setting the classifier does not follow")
    elif reading:
        judge_by_spec(an, cmd, spec, None, f"{cmd.prog} {sub}")  # records the unknown option or the cache write
    elif sub in _APT_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "reinstall") and any(_is_driver_package(p) for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    elif sub == "install" and any(p.text and p.text.endswith("-") and not p.text.startswith("-") for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:remove", f"`{cmd.prog} install pkg-` (a trailing minus) uninstalls pkg")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages or APT state")


# dnf's and yum's queries of what is installed and of their own history read the rpm database and the
# history database only: `list installed` loads no repository (so refreshes no metadata from the network),
# nor does `history`. Only the quiet and cache-only options may come before them: others (--setopt,
# --enablerepo, -c) choose configuration, plugins or repositories.
_RPM_TOOL_QUIET = frozenset({"-q", "--quiet", "-C", "--cacheonly"})


def _rpm_tool_reads(cmd: _Cmd) -> bool:
    texts = [a.text for a in cmd.args]
    while texts and texts[0] in _RPM_TOOL_QUIET:
        texts = texts[1:]
    if cmd.prog not in ("dnf", "yum") or len(texts) < 2 or any(t is None for t in texts) or \
            any(a.pattern for a in cmd.args) and not texts[:2] == ["list", "installed"]:
        return False
    rest = texts[2:]
    if texts[:2] == ["list", "installed"]:
        return all(not t.startswith("-") for t in rest)  # package names or patterns, matched in the rpm database
    if texts[0] == "history" and texts[1] in ("list", "info"):
        return all(re.fullmatch(r"last(-\d+)?|\d+(\.\.\d+)?|[\w.+*-]+", t) for t in rest)
    return False


@_handles("dnf", "yum", "microdnf", "zypper", "tdnf")
def _rpm_tool(an: Analysis, cmd: _Cmd) -> None:
    if _rpm_tool_reads(cmd):
        an.allow(cmd, check_globs=False)
        return
    operands = _operands(cmd.args)
    sub = operands[0].text if operands else None
    if sub in ("remove", "erase", "autoremove", "rm", "groupremove", "distro-sync"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "in", "reinstall", "update", "upgrade") and any(_is_driver_package(p) for p in operands[1:]):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages")


# --------------------------------------------------------------------------- dpkg
#
# dpkg and its tools read long options by their full names only (lib/dpkg/options.c). dpkg's actions
# are options; the query actions are handed to dpkg-query, the .deb ones to dpkg-deb.
_DPKG_ACTIONS_READ = ("-l|--list -s|--status -L|--listfiles -S|--search -p|--print-avail -c|--contents -I|--info "
                      "-C|--audit -V|--verify --get-selections --print-architecture --print-foreign-architectures "
                      "--compare-versions --version --help -h --force-help --assert-help -W|--show -f|--field "
                      "--assert-support-predepends --assert-working-epoch --assert-long-filenames "
                      "--assert-multi-conrep --assert-multi-arch --assert-versioned-provides "
                      "--assert-protected-field --validate-pkgname --validate-trigname --validate-archname "
                      "--validate-version --yet-to-unpack --predep-package --ctrl-tarfile --fsys-tarfile ")
_DPKG_ACTIONS_CHANGE = ("-i|--install -r|--remove -P|--purge --unpack --configure --triggers-only -x|--extract "
                        "-X|--vextract -e|--control -b|--build --set-selections --clear-selections --update-avail "
                        "--merge-avail --record-avail --forget-old-unavail --clear-avail --add-architecture "
                        "--remove-architecture ")
DPKG = Spec(
    "dpkg",
    _DPKG_ACTIONS_READ + _DPKG_ACTIONS_CHANGE.replace(" ", "!change ").replace("!change !change", "!change")
    + "--admindir= --root= --instdir= --no-pager --showformat= --verify-format= --status-fd= -D|--debug= "
    "--log=!log --status-logger=!run --pre-invoke=!run --post-invoke=!run --path-exclude= --path-include= "
    "-R|--recursive -G --refuse-downgrade -O|--selected-only -E|--skip-same-version -B|--auto-deconfigure "
    "--ignore-depends= --no-debsig --abort-after= --robot --no-act|--dry-run|--simulate --pending -a "
    "--force-all --no-force-all --refuse-all",
    style="exact",
    effects={"change": Effect(MUTATING, "installs, configures or changes package state"),
             "log": Effect(MUTATING, "appends to the log file it names"),
             "run": Effect(MUTATING, "runs the command it is given")},
    not_options="--assert- --force- --no-force- --refuse- --validate-",
)
DPKG_QUERY = Spec(
    "dpkg-query",
    "-l|--list -W|--show -s|--status -p|--print-avail -L|--listfiles -c|--control-path -S|--search "
    "--control-list --control-show --load-avail --admindir= --root= --no-pager -f|--showformat= --help -h "
    "--version -?",
    style="exact",
)


@_handles("dpkg")
def _dpkg(an: Analysis, cmd: _Cmd) -> None:
    parsed = DPKG.parse(cmd.args)
    actions = [u for u in parsed.used if u.option.effect == "change"]
    if any(u.option.names[0] in ("-r", "-P") for u in actions):
        an.add(DESTRUCTIVE, "dpkg:-r", "`dpkg -r/-P` removes installed packages")
    elif any(u.option.names[0] == "-i" for u in actions) and any(
        _is_driver_package(Arg(posixpath.basename(a.text))) for a in parsed.operands if a.text
    ):
        an.add(DESTRUCTIVE, "dpkg:driver-install", "`dpkg -i` of a driver package replaces the GPU driver")
    elif actions:
        an.add(MUTATING, f"dpkg:{actions[0].written}", f"`dpkg {actions[0].written}` installs, configures or changes "
                                                       f"package state")
    elif not parsed.used and not parsed.unknown:
        an.add(MUTATING, "dpkg:...", "`dpkg` without a query action is not read-only")
    else:
        def archives(an_: Analysis, _cmd: _Cmd, p: Parsed) -> bool:
            # -c/-I and the tarfile actions open the .deb they are given
            if not p.has("-c", "-I", "--ctrl-tarfile", "--fsys-tarfile", "-f"):
                return True
            return files_read_ok(an_, "dpkg", p.operands[:1])
        judge_by_spec(an, cmd, DPKG, archives)


@_handles("dpkg-query")
def _dpkg_query(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, DPKG_QUERY)  # only ever queries the package database


UPDATE_ALTERNATIVES = Spec(
    "update-alternatives",
    "--install!change --slave --remove!change --remove-all!change --set!change --auto!change --all!change "
    "--config!change --set-selections!change --get-selections --display --query --list --altdir= --admindir= "
    "--instdir= --root= --log=!log --force --skip-auto --quiet --verbose --debug --help --version",
    style="exact", aliases=("alternatives",),
    effects={"change": Effect(DESTRUCTIVE, "switches which version a system-wide name points to"),
             "log": Effect(MUTATING, "writes a log file")},
)


@_handles("update-alternatives", "alternatives")
def _update_alternatives(an: Analysis, cmd: _Cmd) -> None:
    parsed = UPDATE_ALTERNATIVES.parse(cmd.args)
    worst = max(parsed.effects, key=lambda u: UPDATE_ALTERNATIVES.effects[u.option.effect or ""].cls.rank, default=None)
    if parsed.unknown:
        judge_by_spec(an, cmd, UPDATE_ALTERNATIVES)
    elif worst is not None:
        effect = UPDATE_ALTERNATIVES.effects[worst.option.effect or ""]
        an.add(effect.cls, f"update-alternatives:{worst.option.shown}", f"`{cmd.prog} {worst.written}` {effect.what}")
    elif parsed.has("--display", "--query", "--list", "--get-selections", "--help", "--version"):
        judge_by_spec(an, cmd, UPDATE_ALTERNATIVES)
    else:
        an.add(MUTATING, "update-alternatives:unknown", f"`{cmd.prog}` without a query action is not read-only")


# ldconfig (glibc argp): `-p` prints the cache and exits; everything else rebuilds the cache or the
# links, or points it at other files (-C cache file, -f configuration, -r root).
LDCONFIG = Spec(
    "ldconfig",
    "-p|--print-cache -v|--verbose -c|--format= -i|--ignore-aux-cache -V|--version -?|--help --usage "
    "-n!rebuild -N!rebuild -X!rebuild -l!rebuild -C=!rebuild -f=!rebuild -r=!rebuild",
    effects={"rebuild": Effect(MUTATING, "updates links or the cache, or reads another cache, configuration or "
                                         "root")},
)


@_handles("ldconfig")
def _ldconfig(an: Analysis, cmd: _Cmd) -> None:
    parsed = LDCONFIG.parse(cmd.args)
    if parsed.has("-p", "-V", "-?", "--usage") and (not parsed.operands or parsed.effects):
        judge_by_spec(an, cmd, LDCONFIG)  # prints, or reports the option that points it elsewhere
    else:
        an.add(MUTATING, "ldconfig:rebuild-cache", "`ldconfig` without -p rebuilds the dynamic linker cache")


@_handles("ubuntu-drivers")
def _ubuntu_drivers(an: Analysis, cmd: _Cmd) -> None:
    sub = next((t for t in cmd.texts if t and not t.startswith("-")), None)
    if sub in ("install", "autoinstall"):
        an.add(DESTRUCTIVE, "ubuntu-drivers:install", f"`ubuntu-drivers {sub}` installs a GPU driver")
    elif sub in ("list", "devices", "debug", "list-oem") and all(
        not (t or "-").startswith("-") or t in ("--gpgpu", "--free-only", "--recommended", "--include-dkms", "-h",
                                                  "--help") for t in cmd.texts
    ):
        an.allow(cmd, f"ubuntu-drivers {sub}")  # the options by their full names only: none of them writes
    else:
        an.add(MUTATING, f"ubuntu-drivers:{sub or 'unknown'}", "`ubuntu-drivers` with these arguments is not read-only")


SPECS = [APT_GET, APT_CACHE, APT, DPKG, DPKG_QUERY, UPDATE_ALTERNATIVES, LDCONFIG]

# --------------------------------------------------------------------------- listing tools of apt, dpkg and rpm

# apt-mark and apt-config read APT's common options too, but `-o`/`-c` may name any setting or file
# (apt-config dump then runs nothing, apt-mark's state file is written): only -q here.
_APT_MARK_READS = frozenset({"showauto", "showmanual", "showhold", "showinstall", "showremove", "showpurge"})
APT_MARK = Spec("apt-mark", "-q|--quiet -h|--help -v|--version", style="exact", help=())
APT_CONFIG = Spec("apt-config", "-q|--quiet -h|--help -v|--version --empty --format=", style="exact", help=())
DPKG_DEB = Spec(
    "dpkg-deb",
    "-I|--info -c|--contents -f|--field -W|--show --showformat= --verbose -v --debug= -D --nocheck --help --version "
    "-b|--build!writes --root-owner-group -Z= -z= -S= --deb-format= --threads-max= -x|--extract!writes "
    "-X|--vextract!writes -R|--raw-extract!writes -e|--control!writes --ctrl-tarfile --fsys-tarfile -?",
    style="exact", effects={"writes": Effect(MUTATING, "builds or unpacks a package, writing files")},
)
# rpm's query mode (-q), with its selectors and formats; anything else (install, erase, --eval of
# macros that run shell code, --dbpath and --root elsewhere) is not read-only.
RPM_QUERY = Spec(
    "rpm",
    "-q|--query -a|--all -i|--info -l|--list -f|--file -R|--requires --provides -c|--configfiles -d|--docfiles "
    "--changelog --last --whatprovides --whatrequires --scripts -s|--state --qf|--queryformat= -v|--verbose "
    "--quiet --version --nodigest --nosignature",
    style="exact", help=(),
)


def _apt_mark(an: Analysis, cmd: _Cmd) -> None:
    def verb(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        word = parsed.operands[0].text if parsed.operands else None
        if word not in _APT_MARK_READS:
            an_.add(MUTATING, "mutating:apt-mark", f"`apt-mark {word or ''}` changes package state; only its show "
                                                   f"verbs ({', '.join(sorted(_APT_MARK_READS))}) list")
            return False
        return True

    judge_by_spec(an, cmd, APT_MARK, verb)


def _apt_config(an: Analysis, cmd: _Cmd) -> None:
    def verb(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        word = parsed.operands[0].text if parsed.operands else None
        if word not in ("dump", "shell"):
            an_.add(MUTATING, "apt-config:unknown", f"`apt-config {word or ''}` is not dump or shell")
            return False
        return True

    judge_by_spec(an, cmd, APT_CONFIG, verb)


def _dpkg_deb(an: Analysis, cmd: _Cmd) -> None:
    def archives(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        if not parsed.has("-I", "-c", "-f", "-W", "--help", "--version"):
            an_.add(MUTATING, "dpkg-deb:mode", "`dpkg-deb` without -I, -c, -f or -W builds or unpacks a package")
            return False
        return files_read_ok(an_, "dpkg-deb", parsed.operands[:1])

    judge_by_spec(an, cmd, DPKG_DEB, archives)


def _rpm(an: Analysis, cmd: _Cmd) -> None:
    def query(an_: Analysis, cmd_: _Cmd, parsed: Parsed) -> bool:
        if not parsed.has("-q", "--version"):
            an_.add(MUTATING, "rpm:mode", "`rpm` without -q installs, erases or changes packages")
            return False
        return True

    judge_by_spec(an, cmd, RPM_QUERY, query)


_HANDLERS["apt-mark"] = _apt_mark
_HANDLERS["apt-config"] = _apt_config
_HANDLERS["dpkg-deb"] = _dpkg_deb
_HANDLERS["rpm"] = _rpm
SPECS += [APT_MARK, APT_CONFIG, DPKG_DEB, RPM_QUERY]
