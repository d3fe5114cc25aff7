"""git: its global options, the specs of its read-only subcommands, and the settings and options that
make git run programs or write.

git reads its own global options in git.c's handle_options: exact names only, no abbreviation and
no clustering, up to the subcommand. The subcommand then reads its options with parse-options
(unique-prefix abbreviations, `--no-NAME`), or with the revision and diff machinery (log, show,
diff, reflog, stash list/show), which the specs read the same way: a prefix that git itself would
refuse only makes the classifier stricter.

Whose configuration git obeys. Configuration names programs that git runs while it only reads:
core.fsmonitor (every `git status`), diff.external and textconv drivers (`git diff`), filter
drivers (status hashes files through `filter.X.clean`), gpg.program (`log --show-signature`,
`%G?`), man viewers (`git help`), core.pager. The user's and the system's configuration are
trusted: writing them is itself not read-only. `-c`/`--config-env` settings on the command line are
never read-only (`_git_config_override`). What is not trusted is the configuration of a repository
someone else may have put on the host: a read of git is read-only only when the repository it opens
(the working directory, then `-C`, `--git-dir`, `--work-tree`) is outside world-writable directories
such as /tmp, /var/tmp and /dev/shm, where an extracted tarball's `.git/config` can say anything,
and is known (not a run-time word, not after an unknown `cd`). A cloned repository carries no
configuration of its own, so /opt/sglang and the like stay readable. GIT_* variables in the
environment are judged by the shell walk (an assignment or `env` is a wrapper).
"""

from __future__ import annotations

from typing import Any

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.families.files import _tree_ok
from agent.safety.classifier.options import Effect, Parsed, Spec
from agent.safety.classifier.paths import UNTRUSTED_DIRS, normalize
from agent.safety.classifier.registry import _handles, files_read_ok, judge_by_spec

_GIT_COMMAND_KEYS = ("pager", "editor", "sshcommand", "fsmonitor", "askpass", "external", "command", "textconv",
                     "driver", "clean", "smudge", "process", "helper", "program", "difffilter", "packobjectshook",
                     "gitproxy", "cmd")

# --------------------------------------------------------------------------- git's own options

GIT = Spec(
    "git",
    "-C= -c= --config-env= --git-dir= --work-tree= --namespace= --exec-path[=] -p|--paginate -P|--no-pager "
    "--bare --no-replace-objects --no-lazy-fetch --no-optional-locks --no-advice --literal-pathspecs "
    "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --list-cmds= --attr-source= --html-path --man-path "
    "--info-path -v|--version -h|--help --super-prefix=!prefix",
    style="exact",
    stop_at_operand=True,
    # `--exec-path` alone prints the directory; `--exec-path=DIR` runs git's programs from DIR (checked below).
    effects={"prefix": Effect(MUTATING, "changes the path prefix git reports and passes to the programs it runs")},
)

# --------------------------------------------------------------------------- revisions, diffs, pretty formats

_REVISIONS = (
    "-NUM -n|--max-count= --skip= --since= --after= --since-as-filter= --until= --before= --max-age= --min-age= "
    "--author= --committer= --grep-reflog= --grep= --all-match --invert-grep -i|--regexp-ignore-case "
    "--basic-regexp -E|--extended-regexp -F|--fixed-strings -P|--perl-regexp --remove-empty --merges --no-merges "
    "--min-parents= --max-parents= --no-min-parents --no-max-parents --first-parent --exclude-first-parent-only "
    "--not --all --branches[=] --tags[=] --remotes[=] --glob= --exclude= --exclude-hidden= --reflog "
    "--alternate-refs --single-worktree --ignore-missing --bisect --stdin --cherry-mark --cherry-pick "
    "--left-only --right-only --cherry -g|--walk-reflogs --merge --boundary --simplify-by-decoration --show-pulls "
    "--full-history --dense --sparse --simplify-merges --ancestry-path[=] --date-order --author-date-order "
    "--topo-order --reverse --no-walk[=] --do-walk --format= --pretty[=] --abbrev-commit --no-abbrev-commit "
    "--oneline --encoding= --expand-tabs[=] --no-expand-tabs --notes[=] --no-notes --show-notes[=] "
    "--standard-notes --no-standard-notes --show-signature!gpg --relative-date --date= --parents --children "
    "--left-right --graph --show-linear-break[=] --count --log-size --timestamp --source --mailmap --use-mailmap "
    "--no-mailmap --no-use-mailmap --decorate[=] --no-decorate --decorate-refs= --decorate-refs-exclude= "
    "--clear-decorations --full-diff -L= -q|--quiet --end-of-options -c --cc --dd -m -r -t --diff-merges= "
    "--no-diff-merges --combined-all-paths --remerge-diff --no-graph --no-color-moved-ws "
)
_DIFF = (
    "-p|-u|--patch -s|--no-patch -U|--unified= --output=!output --output-indicator-new= --output-indicator-old= "
    "--output-indicator-context= --raw --patch-with-raw --patch-with-stat --indent-heuristic "
    "--no-indent-heuristic --minimal --patience --histogram --anchored= --diff-algorithm= --stat[=] "
    "--stat-width= --stat-name-width= --stat-graph-width= --stat-count= --compact-summary --numstat --shortstat "
    "-X|--dirstat[=] --cumulative --dirstat-by-file[=] --summary -z --name-only --name-status --submodule[=] "
    "--color[=] --no-color --color-moved[=] --no-color-moved --color-moved-ws= --word-diff[=] "
    "--word-diff-regex= --color-words[=] --renames --no-renames --rename-empty --no-rename-empty --check "
    "--ws-error-highlight= --full-index --binary --abbrev[=] --no-abbrev -B|--break-rewrites[=] "
    "-M|--find-renames[=] -C|--find-copies[=] --find-copies-harder -D|--irreversible-delete -l= --diff-filter= "
    "-S= -G= --find-object= --pickaxe-all --pickaxe-regex -O= --skip-to= --rotate-to= -R --relative[=] "
    "--no-relative -a|--text --ignore-cr-at-eol --ignore-space-at-eol -b|--ignore-space-change "
    "-w|--ignore-all-space --ignore-blank-lines -I|--ignore-matching-lines= --inter-hunk-context= "
    "-W|--function-context --no-function-context --exit-code --no-exit-code --quiet --ext-diff!ext-diff "
    "--no-ext-diff --textconv!textconv --no-textconv --ignore-submodules[=] --src-prefix= --dst-prefix= "
    "--no-prefix --default-prefix --line-prefix= --ita-invisible-in-index --ita-visible-in-index --follow "
    "--no-follow "
)
_WRITES_OUTPUT = {
    "output": Effect(MUTATING, "writes its output to a file"),
    "ext-diff": Effect(MUTATING, "runs the external diff program the configuration or GIT_EXTERNAL_DIFF names"),
    "textconv": Effect(MUTATING, "runs the textconv programs the configuration names"),
    # gpg.program from any configuration runs, and gpg writes its trust database under ~/.gnupg
    "gpg": Effect(MUTATING, "runs the gpg program the configuration names to check signatures"),
}
_HELP = (("-h",),)


def _sub_help(name: str) -> tuple[tuple[str, ...], ...]:
    return ((*name.split(), "-h"),)


LOG = Spec("git", _REVISIONS + _DIFF, style="git", effects=_WRITES_OUTPUT, label="log", help=_sub_help("log"))
SHOW = Spec("git", _REVISIONS + _DIFF, style="git", effects=_WRITES_OUTPUT, label="show", help=_sub_help("show"))
DIFF = Spec(
    "git", _DIFF + "--cached --staged --merge-base --no-index -NUM --base --ours --theirs --end-of-options",
    style="git", effects=_WRITES_OUTPUT, label="diff", help=_sub_help("diff"),
    not_options="--dirstat=cumulative --dirstat=files",
)
REFLOG = Spec("git", _REVISIONS + _DIFF, style="git", effects=_WRITES_OUTPUT, label="reflog", help=())
STASH_LIST = Spec("git", _REVISIONS + _DIFF, style="git", effects=_WRITES_OUTPUT, label="stash list", help=())
STASH_SHOW = Spec("git", _DIFF + "--include-untracked --only-untracked", style="git", effects=_WRITES_OUTPUT,
                  label="stash show", help=())
REV_LIST = Spec(
    "git",
    _REVISIONS + "--objects --objects-edge --objects-edge-aggressive --unpacked --object-names --no-object-names "
    "--filter= --no-filter --filter-print-omitted --filter-provided-objects --missing= --exclude-promisor-objects "
    "--indexed-objects --in-commit-order --header --disk-usage[=] --bisect-vars --bisect-all --use-bitmap-index "
    "--no-kept-objects[=] --abbrev[=] --no-abbrev --progress= --quiet",
    style="git", label="rev-list", help=_sub_help("rev-list"), effects={"gpg": _WRITES_OUTPUT["gpg"]},
)
SHORTLOG = Spec(
    "git", _REVISIONS + "-c|--committer -n|--numbered -s|--summary -e|--email -w[=] --group=",
    style="git", label="shortlog", help=_sub_help("shortlog"), effects={"gpg": _WRITES_OUTPUT["gpg"]},
)

# --------------------------------------------------------------------------- the other read subcommands

STATUS = Spec(
    "git",
    "-v|--verbose -s|--short -b|--branch --show-stash --ahead-behind --no-ahead-behind --porcelain[=] --long "
    "-z|--null -u|--untracked-files[=] --ignored[=] --ignore-submodules[=] --column[=] --no-column --renames "
    "--no-renames -M|--find-renames[=]",
    style="git", label="status", help=_sub_help("status"),
)
LS_FILES = Spec(
    "git",
    "-z -t -v -f -c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage -k|--killed "
    "--directory --no-empty-directory --empty-directory --eol -u|--unmerged --resolve-undo -x|--exclude= "
    "-X|--exclude-from= --exclude-per-directory= --exclude-standard --full-name --recurse-submodules "
    "--error-unmatch --with-tree= --abbrev[=] --debug --deduplicate --sparse --format=",
    style="git", label="ls-files", help=_sub_help("ls-files"),
)
LS_TREE = Spec(
    "git",
    "-d -r -t -z -l|--long --name-only|--name-status --object-only --full-name --full-tree --format= --abbrev[=]",
    style="git", label="ls-tree", help=_sub_help("ls-tree"),
)
BLAME = Spec(
    "git",
    _REVISIONS + "--incremental -b --root --show-stats --progress --score-debug -f|--show-name -n|--show-number "
    "-p|--porcelain --line-porcelain -c -t -l -s -e|--show-email -w --ignore-rev= --ignore-revs-file= "
    "--color-lines --color-by-age --minimal -S= --contents= -C[=] -M[=] -L= --abbrev[=] --textconv!textconv "
    "--no-textconv --date=",
    style="git", label="blame", help=_sub_help("blame"), effects=_WRITES_OUTPUT,
)
CAT_FILE = Spec(
    "git",
    "-e -p -t -s --allow-unknown-type --batch[=] --batch-check[=] --batch-command[=] --batch-all-objects --buffer "
    "--follow-symlinks --unordered -z -Z --path= --use-mailmap|--mailmap --no-use-mailmap --no-mailmap "
    "--textconv!textconv --filters!filters",
    style="git", label="cat-file", help=_sub_help("cat-file"), not_options="--batch-check",
    effects={"textconv": _WRITES_OUTPUT["textconv"],
             "filters": Effect(MUTATING, "runs the smudge filter programs the configuration names")},
)
FOR_EACH_REF = Spec(
    "git",
    "--points-at= --merged= --no-merged= --contains= --no-contains= -s|--shell -p|--perl --python --tcl --count= "
    "--format= --color[=] --sort= --ignore-case --omit-empty --exclude= --stdin",
    style="git", label="for-each-ref", help=_sub_help("for-each-ref"),
)
SHOW_REF = Spec(
    "git",
    "-q|--quiet --verify --head -d|--dereference -s|--hash[=] --abbrev[=] --tags --heads --branches --exists "
    "--exclude-existing[=]",
    style="git", label="show-ref", help=_sub_help("show-ref"),
)
DESCRIBE = Spec(
    "git",
    "--contains --debug --all --tags --long --first-parent --abbrev[=] --exact-match --candidates= --match= "
    "--exclude= --always --dirty[=]!index --broken[=]!index",
    style="git", label="describe", help=_sub_help("describe"),
    # describe --dirty refreshes the index and writes it back (the red team saw .git/index rewritten).
    effects={"index": Effect(MUTATING, "refreshes the index and writes it back")},
)
REV_PARSE = Spec(
    "git",
    "--parseopt --sq-quote --keep-dashdash --stop-at-non-option --stuck-long --revs-only --no-revs --flags "
    "--no-flags --default= --prefix= --verify -q|--quiet --sq --short[=] --not --abbrev-ref[=] --symbolic "
    "--symbolic-full-name --all --branches[=] --tags[=] --remotes[=] --glob= --exclude= --exclude-hidden= "
    "--disambiguate= --local-env-vars --path-format= --git-dir --git-common-dir --absolute-git-dir "
    "--resolve-git-dir= --git-path= --show-toplevel --show-superproject-working-tree --shared-index-path "
    "--show-object-format[=] --show-ref-format --show-cdup --show-prefix --is-inside-git-dir "
    "--is-inside-work-tree --is-bare-repository --is-shallow-repository --since= --after= --until= --before= "
    "--end-of-options",
    style="exact", label="rev-parse", help=(),  # its own ad-hoc parser: exact names only
)
GREP = Spec(
    "git",
    "--cached --no-index --untracked --exclude-standard --no-exclude-standard --recurse-submodules "
    "-v|--invert-match -i|--ignore-case -w|--word-regexp -a|--text -I --textconv!textconv --no-textconv "
    "-r|--recursive --max-depth= -E|--extended-regexp -G|--basic-regexp -F|--fixed-strings -P|--perl-regexp "
    "-n|--line-number --column -h -H --full-name -l|--files-with-matches|--name-only -L|--files-without-match "
    "-z|--null -o|--only-matching -c|--count --color[=] --no-color --break --heading -C|--context= "
    "-B|--before-context= -A|--after-context= --threads= -NUM -p|--show-function -W|--function-context -f= -e= "
    "--and --or --not -q|--quiet --all-match -O|--open-files-in-pager[=]!pager --ext-grep -m|--max-count= "
    "--end-of-options",
    style="git", label="grep", help=_sub_help("grep"),
    effects={"textconv": _WRITES_OUTPUT["textconv"],
             "pager": Effect(MUTATING, "runs the program it names (or the pager) on the files that match")},
)
BRANCH = Spec(
    "git",
    "-v|--verbose -q|--quiet -t|--track[=]!config --no-track -u|--set-upstream-to=!config --unset-upstream!config "
    "--color[=] --no-color -r|--remotes --contains= --no-contains= --abbrev[=] --no-abbrev -a|--all "
    "-d|--delete!delete -D!delete -m|--move!move -M!move -c|--copy!move -C!move -l|--list --show-current "
    "--create-reflog!config --edit-description!config -f|--force!move --merged= --no-merged= --column[=] "
    "--no-column --sort= --points-at= -i|--ignore-case --recurse-submodules!config --format= --omit-empty",
    style="git", label="branch", help=_sub_help("branch"),
    effects={"delete": Effect(DESTRUCTIVE, "deletes branches"),
             "move": Effect(MUTATING, "renames, copies or overwrites branches"),
             "config": Effect(MUTATING, "creates branches or changes their configuration")},
)
TAG = Spec(
    "git",
    "-l|--list -n[=] -d|--delete!delete -v|--verify!verify -a|--annotate!create -m|--message=!create "
    "-F|--file=!create -e|--edit!create -s|--sign!create --cleanup=!create -u|--local-user=!create "
    "-f|--force!create --create-reflog!create --column[=] --no-column --contains= --no-contains= --merged= "
    "--no-merged= --sort= --points-at= --format= --color[=] -i|--ignore-case --omit-empty --trailer=!create",
    style="git", label="tag", help=_sub_help("tag"),
    effects={"delete": Effect(MUTATING, "deletes tags"),
             "verify": Effect(MUTATING, "runs the signature verification program (gpg.program)"),
             "create": Effect(MUTATING, "creates or replaces tags")},
)
CONFIG = Spec(
    "git",
    "--global --system --local --worktree -f|--file= --blob= --get --get-all --get-regexp --get-urlmatch "
    "--replace-all!write --add!write --unset!write --unset-all!write --rename-section!write "
    "--remove-section!write -l|--list --fixed-value -e|--edit!edit -t|--type= --no-type --bool --int "
    "--bool-or-int --bool-or-str --path --expiry-date -z|--null --name-only --includes --no-includes "
    "--show-origin --show-scope --default= --get-color --get-colorbool --all --regexp --value= --url= "
    "--comment=!write --append!write",
    style="git", label="config", help=_sub_help("config"),
    effects={"write": Effect(MUTATING, "changes configuration"),
             "edit": Effect(MUTATING, "opens the configuration in an editor")},
)
REMOTE = Spec("git", "-v|--verbose", style="git", label="remote", help=_sub_help("remote"), stop_at_operand=True,
              # options of `git remote add/set-url/prune...`, which are not read-only anyway
              not_options="--add --all --auto --delete --dry-run --mirror --no-tags --prune --push --tags")
REMOTE_SHOW = Spec("git", "-n", style="git", label="remote show", help=())
REMOTE_GET_URL = Spec("git", "--push --all", style="git", label="remote get-url", help=())
STASH = Spec("git", "", style="git", label="stash", help=(), stop_at_operand=True)
WORKTREE_LIST = Spec("git", "-v|--verbose --porcelain -z --expire=", style="git", label="worktree list", help=())
SUBMODULE_STATUS = Spec("git", "-q|--quiet --cached --recursive", style="git", label="submodule status", help=())
HELP = Spec(
    "git",
    "-a|--all --external-commands --aliases -v|--verbose -g|--guides -c|--config --user-interfaces "
    "--developer-interfaces -i|--info -m|--man -w|--web!web",
    style="git", label="help", help=_sub_help("help"),
    effects={"web": Effect(MUTATING, "starts a web browser")},
)
VERSION = Spec("git", "--build-options", style="git", label="version", help=_sub_help("version"))

SPECS = [GIT, LOG, SHOW, DIFF, REV_LIST, SHORTLOG, STATUS, LS_FILES, LS_TREE, BLAME, CAT_FILE, FOR_EACH_REF,
         SHOW_REF, DESCRIBE, REV_PARSE, GREP, BRANCH, TAG, CONFIG, REMOTE, HELP, VERSION, REFLOG, STASH_LIST,
         STASH_SHOW, REMOTE_SHOW, REMOTE_GET_URL, STASH, WORKTREE_LIST, SUBMODULE_STATUS]

# Existing rule names of subcommands whose effects were judged before the specs (tests and old
# transcripts use them): the effect rule `git:--delete` of `git branch` is reported as `git:branch`.
_RULES = {"branch": "git:branch", "tag": "git:tag", "config": "git:config", "grep": {"git:--open-files-in-pager":
                                                                                     "git:grep-O"}}


class _Judging:
    """The analysis as a subcommand's spec sees it: rules renamed to the subcommand's, and a read-only
    verdict given only when the repository git opens is one whose configuration can be trusted."""

    def __init__(self, an: Analysis, rules: dict[str, str] | str | None, untrusted: tuple[str, str] | None):
        self._an = an
        self._rules = rules
        self._untrusted = untrusted

    def add(self, cls, rule, reason, **kwargs) -> None:
        if isinstance(self._rules, str) and rule.startswith("git:-") and rule != "git:unknown-option":
            rule = self._rules
        elif isinstance(self._rules, dict):
            rule = self._rules.get(rule, rule)
        self._an.add(cls, rule, reason, **kwargs)

    def allow(self, cmd: _Cmd, label: str | None = None, check_globs: bool = True) -> None:
        if self._untrusted is not None:
            self._an.add(MUTATING, *self._untrusted)
            return
        self._an.allow(cmd, label, check_globs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._an, name)


def _repository_problem(an: Analysis, parsed: Parsed) -> tuple[str, str] | None:
    """(rule, reason) when the repository git would open is not known to be trusted."""
    where = an.cwd
    places = []
    for used in parsed.used:
        if used.option.names[0] in ("-C", "--git-dir", "--work-tree"):
            value = used.value
            if value is None or value.text is None or value.pattern:
                return "git:unknown-repo", f"`git {used.written}` names a directory known only when the command runs"
            if used.option.names[0] == "-C":
                where = normalize(value.text, where) if where is not None else None
                places.append(where)
            else:
                places.append(normalize(value.text, where) if where is not None else None)
    places.append(where)
    for place in places:
        if place is None:
            return "git:unknown-repo", ("git would open a repository in a directory the classifier cannot know, whose "
                                        "own configuration (core.fsmonitor, diff.external) may run programs")
        if place != "/~" and not place.startswith("/~/") and (place + "/").startswith(UNTRUSTED_DIRS):
            return "git:untrusted-repo", (f"git would open a repository under `{place}`, a world-writable directory: its "
                                          f"own configuration (core.fsmonitor, diff.external, filters) may run programs")
    return None


@_handles("git")
def _git(an: Analysis, cmd: _Cmd) -> None:
    parsed = GIT.parse(cmd.args)
    clean = True
    for used in parsed.used:
        if used.option.names[0] in ("-c", "--config-env"):
            _git_config_override(an, cmd, used.value or Arg(None))
            clean = False
        elif used.option.names[0] == "--exec-path" and used.value is not None:
            an.add(MUTATING, "git:--exec-path", "`git --exec-path=DIR` runs git's programs from DIR")
            clean = False
        elif used.option.effect is not None:
            an.add(MUTATING, f"git:{used.option.shown}", f"`git {used.written}` {GIT.effects[used.option.effect].what}")
            clean = False
    if parsed.unknown:
        an.add(MUTATING, "git:unknown-option", f"`git {parsed.unknown[0]}` is not one of git's own options")
        clean = False
    if not clean:
        return
    if not parsed.operands:
        an.allow(cmd)  # `git --version`, `git --exec-path`, `git` (usage)
        return
    sub_arg, rest = parsed.operands[0], parsed.operands[1:]
    sub = sub_arg.text
    untrusted = _repository_problem(an, parsed)
    if sub is None or sub_arg.pattern:
        an.add(MUTATING, "git:unknown", "`git` runs a subcommand known only when the command runs")
        return
    judging = _Judging(an, _RULES.get(sub), untrusted)
    if not _git_subcommand(judging, cmd, sub, rest):
        problem = _git_other_problem(sub, rest)
        an.add(*problem)


def _sub_cmd(cmd: _Cmd, rest: list[Arg]) -> _Cmd:
    return _Cmd(cmd.name, cmd.prog, rest, cmd.stdin)


def _reads_files(values: list[Arg], an: Analysis, shown: str) -> bool:
    """Files git opens for reading (`-f FILE`, `--contents FILE`, paths of `--no-index`): no devices."""
    return files_read_ok(an, "git", values, shown)


_SIMPLE = {"log": LOG, "show": SHOW, "rev-list": REV_LIST, "shortlog": SHORTLOG, "status": STATUS,
           "ls-files": LS_FILES, "ls-tree": LS_TREE, "for-each-ref": FOR_EACH_REF, "show-ref": SHOW_REF,
           "describe": DESCRIBE, "rev-parse": REV_PARSE, "cat-file": CAT_FILE, "help": HELP, "version": VERSION,
           "whatchanged": LOG}
_FILE_VALUES = {"ls-files": ("-X", "--exclude-from"), "blame": ("--contents", "-S", "--ignore-revs-file"),
                "diff": ("-O",), "log": ("-O",), "show": ("-O",)}


def _git_subcommand(an: _Judging, cmd: _Cmd, sub: str, rest: list[Arg]) -> bool:
    """Judge a subcommand that has a spec; False when it has none (then it is not read-only)."""
    sub_cmd = _sub_cmd(cmd, rest)
    label = f"git {sub}"
    files = _FILE_VALUES.get(sub, ())
    # %G placeholders and %(signature) make git verify signatures, which runs gpg.program (and gpg
    # writes ~/.gnupg); whichever option carries the format, abbreviated or not.
    signed = next((a.text for a in rest if a.text and ("%G" in a.text or "%(signature" in a.text)), None)
    if signed is not None:
        an.add(MUTATING, "git:--show-signature", f"`{label}` with `{signed}` verifies signatures, which runs the gpg "
                                                 f"program the configuration names")
        return True

    def file_values(an_: Analysis, _cmd: _Cmd, parsed: Parsed) -> bool:
        return _reads_files(parsed.values(*files), an_, label)

    if sub in _SIMPLE:
        judge_by_spec(an, sub_cmd, _SIMPLE[sub], file_values, label)
    elif sub == "blame":
        judge_by_spec(an, sub_cmd, BLAME, file_values, label)
    elif sub == "diff":
        def diff_paths(an_: Analysis, _cmd: _Cmd, parsed: Parsed) -> bool:
            # outside a repository, or with --no-index, git diff opens the paths it is given
            paths = [a for a in parsed.operands if a.text and (a.text.startswith("/") or "/" in a.text)]
            return file_values(an_, _cmd, parsed) and _reads_files(paths, an_, label)
        judge_by_spec(an, sub_cmd, DIFF, diff_paths, label)
    elif sub == "grep":
        def grep_files(an_: Analysis, _cmd: _Cmd, parsed: Parsed) -> bool:
            operands = parsed.operands if parsed.has("-e", "-f") else parsed.operands[1:]
            if parsed.has("--no-index"):  # then it reads every file under the paths, tracked or not
                trees = [a for a in operands if a.text != "--"] or [Arg(".")]
                if not all(_tree_ok(an_, _cmd, tree, "grep --no-index") for tree in trees):
                    return False
            paths = [a for a in operands if a.text and a.text.startswith("/")]
            return _reads_files(parsed.values("-f") + paths, an_, label)
        judge_by_spec(an, sub_cmd, GREP, grep_files, label)
    elif sub == "branch":
        def branch_operands(an_: Analysis, _cmd: _Cmd, parsed: Parsed) -> bool:
            listing = parsed.has("-l", "-a", "-r", "--contains", "--no-contains", "--merged", "--no-merged",
                                 "--points-at", "--show-current")
            if parsed.operands and not listing:
                an_.add(MUTATING, "git:branch", "`git branch NAME` creates a branch")
                return False
            return True
        judge_by_spec(an, sub_cmd, BRANCH, branch_operands, label)
    elif sub == "tag":
        def tag_operands(an_: Analysis, _cmd: _Cmd, parsed: Parsed) -> bool:
            listing = parsed.has("-l", "-n", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at")
            if parsed.operands and not listing:
                an_.add(MUTATING, "git:tag", "`git tag NAME` creates a tag")
                return False
            return True
        judge_by_spec(an, sub_cmd, TAG, tag_operands, label)
    elif sub == "config":
        judge_by_spec(an, sub_cmd, CONFIG, _config_operands, label)
    elif sub == "remote":
        parsed = REMOTE.parse(rest)
        if parsed.unknown or not parsed.operands:
            judge_by_spec(an, sub_cmd, REMOTE, None, label)
            return True
        verb, verb_rest = parsed.operands[0].text, parsed.operands[1:]
        if verb == "get-url":
            judge_by_spec(an, _sub_cmd(cmd, verb_rest), REMOTE_GET_URL, None, "git remote get-url")
        elif verb == "show" and REMOTE_SHOW.parse(verb_rest).has("-n"):
            judge_by_spec(an, _sub_cmd(cmd, verb_rest), REMOTE_SHOW, None, "git remote show")
        elif verb == "show":
            an.add(MUTATING, "git:remote", "`git remote show NAME` without -n contacts the remote host")
        else:
            an.add(MUTATING, "git:remote", f"`git remote {verb or '...'}` changes remotes or fetches from them")
    elif sub == "stash":
        verb = rest[0].text if rest else None
        if verb == "list":
            judge_by_spec(an, _sub_cmd(cmd, rest[1:]), STASH_LIST, None, "git stash list")
        elif verb == "show":
            judge_by_spec(an, _sub_cmd(cmd, rest[1:]), STASH_SHOW, None, "git stash show")
        elif verb in ("drop", "clear"):
            an.add(DESTRUCTIVE, "git:stash-drop", "`git stash drop/clear` discards stashed changes")
        else:
            an.add(MUTATING, "git:stash", "`git stash` changes the working tree")
    elif sub == "reflog":
        verb = rest[0].text if rest else None
        if verb in ("expire", "delete", "drop"):
            an.add(DESTRUCTIVE, "git:reflog", "`git reflog expire/delete` discards history entries")
        elif verb == "exists" and len(rest) == 2 and not (rest[1].text or "-").startswith("-"):
            an.allow(cmd, "git reflog exists")
        else:
            judge_by_spec(an, _sub_cmd(cmd, rest[1:] if verb in ("show", "list") else rest), REFLOG, None,
                          "git reflog")
    elif sub == "worktree" and rest and rest[0].text == "list":
        judge_by_spec(an, _sub_cmd(cmd, rest[1:]), WORKTREE_LIST, None, "git worktree list")
    elif sub == "submodule":
        words = rest[1:] if rest and rest[0].text in ("--quiet", "-q") else rest
        if not words or words[0].text == "status":
            judge_by_spec(an, _sub_cmd(cmd, words[1:]), SUBMODULE_STATUS, None, "git submodule status")
        else:
            return False
    else:
        return False
    return True


def _config_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """`git config NAME` reads, `git config NAME VALUE` sets; `list` and `get` are the newer read forms."""
    words = [a.text for a in parsed.operands]
    reading = parsed.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--get-color",
                         "--get-colorbool")
    if not reading and words[:1] not in (["list"], ["get"]) and len(words) >= 2:
        an.add(MUTATING, "git:config", "`git config NAME VALUE` changes configuration")
        for target in parsed.values("-f"):
            an.write(target, "`git config --file`", "git")
        return False
    return _reads_files(parsed.values("-f"), an, "git config")


def _git_config_override(an: Analysis, cmd: _Cmd, setting: Arg) -> None:
    an.add(
        MUTATING,
        "git:-c",
        "`git -c` overrides configuration, which can name a program for git to run (pager, editor, diff tool)",
        decoded=setting.text,
    )
    if setting.text is None or "=" not in setting.text:
        return
    written, value = setting.text.split("=", 1)
    key = written.lower()
    if not value:
        return
    if key.startswith("alias."):
        code = value[1:] if value.startswith("!") else f"git {value}"
        an.inner_source(code, f"git -c {written}")
    elif key.startswith("pager.") or key.rsplit(".", 1)[-1] in _GIT_COMMAND_KEYS:
        an.inner_source(value, f"git -c {written}")


def _git_other_problem(sub: str, rest: list[Arg]):
    """The subcommands that change something: how bad."""
    texts = [a.text or "" for a in rest]
    shorts = {letter for t in texts if t.startswith("-") and not t.startswith("--") for letter in t[1:]}
    longs = {t.split("=", 1)[0] for t in texts if t.startswith("--")}
    if sub == "reset" and longs & {"--hard", "--merge", "--keep"}:
        return DESTRUCTIVE, "git:reset-hard", "`git reset --hard` discards uncommitted changes"
    if sub == "clean" and ("f" in shorts or "--force" in longs):
        return DESTRUCTIVE, "git:clean", "`git clean -f` deletes untracked files"
    if sub in ("checkout", "switch") and ("f" in shorts or "--force" in longs or "--" in texts):
        return DESTRUCTIVE, f"git:{sub}-force", f"`git {sub}` with -f or paths discards local changes"
    if sub == "restore":
        return DESTRUCTIVE, "git:restore", "`git restore` discards local changes"
    if sub == "push" and ("f" in shorts or longs & {"--force", "--force-with-lease", "--delete", "--mirror"}):
        return DESTRUCTIVE, "git:push-force", "`git push --force/--delete` overwrites or deletes remote history"
    return MUTATING, f"git:{sub}", f"`git {sub}` changes the repository or its configuration"
