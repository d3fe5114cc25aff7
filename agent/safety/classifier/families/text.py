"""Text tools with options that write or run programs: sort, uniq, printf, file, rg, base64."""

from __future__ import annotations

from agent.safety.classifier.command import MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.families.files import _globs_ok, _reads_ok, _relative_patterns_ok, _tree_ok, spec_handler
from agent.safety.classifier.options import Effect, Parsed, Spec
from agent.safety.classifier.registry import _HANDLERS

_HELP_VERSION = "--help --version"

SORT = Spec(
    "sort",
    "-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case -g|--general-numeric-sort "
    "-i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort "
    "--random-source= -r|--reverse --sort= -V|--version-sort --batch-size= -c|--check[=] -C "
    "--debug -k|--key= -m|--merge -s|--stable -S|--buffer-size= -t|--field-separator= "
    "-T|--temporary-directory= --parallel= -u|--unique -z|--zero-terminated " + _HELP_VERSION + " "
    "--output|-o=!write --compress-program=!exec --files0-from=!list",
    effects={
        "write": Effect(MUTATING, "writes its output to a file"),
        "exec": Effect(MUTATING, "runs another program"),  # to compress its temporary files
        # The list names files the classifier cannot see: a device among them is opened too.
        "list": Effect(MUTATING, "opens every file named in a list the classifier cannot read"),
    },
    files=True,
)


def _sort_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return (_globs_ok(an, cmd) and _reads_ok(an, cmd, parsed.values("--random-source"))
            and _relative_patterns_ok(an, cmd, parsed))


UNIQ = Spec(
    "uniq",
    "-c|--count -d|--repeated -D --all-repeated[=] -f|--skip-fields= --group[=] -i|--ignore-case "
    "-s|--skip-chars= -u|--unique -z|--zero-terminated -w|--check-chars= -NUM " + _HELP_VERSION,
)


def _uniq_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """`uniq INPUT OUTPUT` writes OUTPUT."""
    if len(parsed.operands) >= 2:
        an.add(MUTATING, "uniq:output-file", "`uniq INPUT OUTPUT` writes to OUTPUT")
        an.write(parsed.operands[1], "`uniq INPUT OUTPUT`", "uniq")  # a system file makes it destructive
        return False
    return _reads_ok(an, cmd, parsed.operands) and _relative_patterns_ok(an, cmd, parsed)


# The bash builtin: options end at the first operand (the format); -v assigns a shell variable.
PRINTF = Spec(
    "printf",
    "-v=!assign " + _HELP_VERSION,
    effects={"assign": Effect(MUTATING, "assigns a shell variable, which can change later commands")},
    permute=False,
)


def _printf(an: Analysis, cmd: _Cmd) -> None:
    if cmd.args and (cmd.args[0].text or "").startswith("-v"):
        an.add(MUTATING, "printf:-v", "`printf -v` assigns a shell variable, which can change later commands")
        return
    spec_handler(PRINTF)(an, cmd)


FILE = Spec(
    "file",
    "--help -v|--version -m|--magic-file= -z|--uncompress -Z|--uncompress-noreport -b|--brief "
    "-c|--checking-printout -e|--exclude= --exclude-quiet= -f|--files-from= -F|--separator= -i|--mime --apple "
    "--extension --mime-type --mime-encoding -k|--keep-going -l|--list -L|--dereference -h|--no-dereference "
    "-n|--no-buffer -N|--no-pad -0|--print0 -P|--parameter= -r|--raw -s|--special-files -S|--no-sandbox "
    "-d|--debug --compile|-C!compile -p|--preserve-date!atime",
    effects={
        "compile": Effect(MUTATING, "compiles a magic file and writes it"),
        # it puts each file's access time back with utime(2), which changes the inode.
        "atime": Effect(MUTATING, "resets the access time of every file it reads"),
    },
    files=True,
)


def _file_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    magic = [m for v in parsed.values("-m") for m in (v.text or "").split(":")] if parsed.has("-m") else []
    return (_globs_ok(an, cmd) and _reads_ok(an, cmd, parsed.values("-f") + [Arg(m) for m in magic if m])
            and _relative_patterns_ok(an, cmd, parsed))


# ripgrep 14 (not installed here): its options from `rg --help`; its parser takes long options by
# their full names only.
RG = Spec(
    "rg",
    "-e|--regexp= -f|--file= --pre=!exec --no-pre --pre-glob= -z|--search-zip --no-search-zip "
    "--messages --no-messages --pcre2-unicode --no-pcre2-unicode --passthru|--passthrough "  # ripgrep 13 too
    "-s|--case-sensitive --crlf --no-crlf --dfa-size-limit= -E|--encoding= --no-encoding --engine= "
    "-F|--fixed-strings --no-fixed-strings -i|--ignore-case -v|--invert-match --no-invert-match "
    "-x|--line-regexp -m|--max-count= --mmap --no-mmap -U|--multiline --no-multiline --multiline-dotall "
    "--no-multiline-dotall --no-unicode --unicode --null-data -P|--pcre2 --no-pcre2 --regex-size-limit= "
    "-S|--smart-case --stop-on-nonmatch -a|--text --no-text -j|--threads= -w|--word-regexp --auto-hybrid-regex "
    "--no-auto-hybrid-regex --binary --no-binary -L|--follow --no-follow -g|--glob= --glob-case-insensitive "
    "--no-glob-case-insensitive --hidden --no-hidden --iglob= --ignore-file=  --ignore-file-case-insensitive "
    "--no-ignore-file-case-insensitive -d|--max-depth|--maxdepth= --max-filesize= --no-ignore --ignore "
    "--no-ignore-dot --ignore-dot --no-ignore-exclude --ignore-exclude --no-ignore-files --ignore-files "
    "--no-ignore-global --ignore-global --no-ignore-messages --ignore-messages --no-ignore-parent "
    "--ignore-parent --no-ignore-vcs --ignore-vcs --no-require-git --require-git --one-file-system "
    "--no-one-file-system -t|--type= -T|--type-not= --type-add= --type-clear= -u|--unrestricted -A|--after-context= "
    "-B|--before-context= -C|--context= --block-buffered --no-block-buffered -b|--byte-offset "
    "--no-byte-offset --color= --colors= --column --no-column --context-separator= --no-context-separator "
    "--field-context-separator= --field-match-separator= --heading --no-heading -H|--with-filename "
    "-I|--no-filename --hyperlink-format= --include-zero --no-include-zero --line-buffered "
    "--no-line-buffered -n|--line-number -N|--no-line-number -M|--max-columns= --max-columns-preview "
    "--no-max-columns-preview -0|--null -o|--only-matching --path-separator= -p|--pretty -q|--quiet "
    "-r|--replace= --sort= --sortr= --trim --no-trim --vimgrep -c|--count --count-matches -l|--files-with-matches "
    "--files-without-match --json --no-json --debug --no-ignore-dot --stats --no-stats --trace --files "
    "--generate= --no-config --pcre2-version --type-list -h|--help -V|--version "
    "--hostname-bin=!exec -NUM",
    style="exact",
    effects={"exec": Effect(MUTATING, "runs another program")},
    help=(("--help",),), not_options="--print0",  # "find's --print0 flag", in the prose of -0
)


def _rg_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """rg searches the trees it is given (the working directory without one): not /, /proc, /sys, /dev."""
    if not _globs_ok(an, cmd) or not _reads_ok(an, cmd, parsed.values("-f", "--ignore-file")):
        return False
    paths = parsed.operands if parsed.has("-e", "-f") else parsed.operands[1:]
    if parsed.has("--files", "--type-list", "--generate", "--help", "--version", "--pcre2-version"):
        paths = parsed.operands
    return all(_tree_ok(an, cmd, arg, "") for arg in paths or [Arg(".")])


BASE64 = Spec("base64", "-d|--decode -i|--ignore-garbage -w|--wrap= " + _HELP_VERSION, files=True)


def _base64_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return _relative_patterns_ok(an, cmd, parsed)


_HANDLERS["sort"] = spec_handler(SORT, _sort_operands)
_HANDLERS["uniq"] = spec_handler(UNIQ, _uniq_operands)
_HANDLERS["printf"] = _printf
_HANDLERS["file"] = spec_handler(FILE, _file_operands)
_HANDLERS["rg"] = spec_handler(RG, _rg_operands)
_HANDLERS["base64"] = spec_handler(BASE64, _base64_operands)

SPECS = [SORT, UNIQ, PRINTF, FILE, RG, BASE64]
