"""Readers of binary and compressed files: nm, objdump, cuobjdump, xxd, hexdump, zcat, xzcat.

Each opens the files it names and prints what is in them; the files are checked like any reader's
(`xxd /dev/watchdog` arms the watchdog). What else each can do is refused:
- binutils (nm, objdump) read `@FILE` as more options (`nm @/dev/watchdog`), load a plugin
  (`--plugin`, `--target=plugin`), and objdump's -S/--source, -I/--include and -W/--dwarf open
  further files that the inspected file names (its source files, debug links): none is read-only.
  Only shared libraries and objects are accepted (`*.so`, `*.so.N`, `*.o`, `*.a`): the red-team corpus
  of 2026-12c holds `nm /bin/ls` and `objdump -d /bin/ls` among the lines that must stay refused.
- cuobjdump's --extract-elf/-xelf and --extract-ptx/-xptx write the embedded images to files, and
  --options-file reads options from one.
- xxd writes its second operand (`xxd IN OUT`) and turns a dump back into binary with -r; hexdump's
  -f/--format-file reads a format file.
- the files may not lie in a world-writable directory (/tmp, /var/tmp, /dev/shm...), where a planted
  symlink or FIFO decides what is opened (`xxd -l1 /tmp/wd`, a red-team line of 2026-12-03).
- zcat and xzcat only decompress to standard output; xzcat's -z/--compress, -k/--keep and a missing
  -c are not options it is run with here (they are xz's), so they are not in its spec.
"""

from __future__ import annotations

import re

from agent.safety.classifier.command import MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec
from agent.safety.classifier.paths import in_trusted_places
from agent.safety.classifier.registry import _handles, files_read_ok, judge_by_spec

_WRITES = Effect(MUTATING, "writes files")
_OPENS = Effect(MUTATING, "opens files that the inspected file names, which the classifier cannot see")
_LOADS = Effect(MUTATING, "loads a plugin, code the classifier cannot see")

NM = Spec(
    "nm",
    "-A|-o|--print-file-name -a|--debug-syms -B -C|--demangle[=] --no-demangle -D|--dynamic --defined-only "
    "-U -e -f|--format= -g|--extern-only -h|--help -i|--ifunc-chars= -j|--just-symbols -l|--line-numbers "
    "-n|-v|--numeric-sort -p|--no-sort -P|--portability -r|--reverse-sort -S|--print-size -s|--print-armap "
    "--size-sort --special-syms --synthetic -t|--radix= -u|--undefined-only --unicode= -V|--version "
    "-W|--no-weak --with-symbol-versions --without-symbol-versions --quiet --recurse-limit --no-recurse-limit "
    "-X= --plugin=!loads --target=!loads",
    files=True, effects={"loads": _LOADS},
)
OBJDUMP = Spec(
    "objdump",
    "-a|--archive-headers -b|--target=!loads -C|--demangle[=] -d|--disassemble[=] -D|--disassemble-all "
    "-z|--disassemble-zeroes -f|--file-headers -F|--file-offsets -h|--section-headers|--headers -H|--help "
    "-i|--info -j|--section= -l|--line-numbers -M|--disassembler-options= -m|--architecture= "
    "-p|--private-headers -P|--private= -r|--reloc -R|--dynamic-reloc -s|--full-contents -t|--syms "
    "-T|--dynamic-syms -x|--all-headers -w|--wide -v|--version --start-address= --stop-address= "
    "--prefix-addresses --no-addresses --show-raw-insn --no-show-raw-insn --insn-width= --adjust-vma= "
    "--special-syms --show-all-symbols --visualize-jumps[=] --disassembler-color= --endian= -EB -EL "
    "--file-start-context --inlines --unicode= --no-recurse-limit --recurse-limit --ctf[=] --ctf-parent= --sframe[=] "
    "-S|--source!opens --source-comment[=]!opens -I|--include=!opens -W|--dwarf[=]!opens -g|--debugging!opens "
    "-e|--debugging-tags!opens -G|--stabs!opens --dwarf-depth= --dwarf-start= --dwarf-check "
    "-L|--process-links!opens --prefix=!opens --prefix-strip=!opens",
    files=True, effects={"loads": _LOADS, "opens": _OPENS},
)
XXD = Spec(
    "xxd",
    "-a|-autoskip -b|-bits -C|-capitalize -c|-cols= -E|-EBCDIC -e -g|-groupsize= -h|-help -i|-include "
    "-l|-len= -n|-name= -o|-offset= -p|-ps|-postscript|-plain -d -r|-revert!writes -R= -s|-seek= -u "
    "-v|-version",
    single_dash_long=True, files=True, effects={"writes": _WRITES}, help=(("-h",),),
)
HEXDUMP = Spec(
    "hexdump",
    "-b|--one-byte-octal -c|--one-byte-char -C|--canonical -d|--two-bytes-decimal -o|--two-bytes-octal "
    "-x|--two-bytes-hex -e|--format= -f|--format-file=!opens -L|--color[=] -n|--length= -s|--skip= "
    "-v|--no-squeezing -h|--help -V|--version",
    files=True, effects={"opens": Effect(MUTATING, "reads its format from a file, which may be a device")},
    aliases=("hd",),
)
ZCAT = Spec("zcat", "-f|--force -h|--help -l|--list -q|--quiet -r|--recursive -S|--suffix= --synchronous -t|--test "
                    "-v|--verbose -V|--version", files=True, aliases=("gzcat",))
XZCAT = Spec("xzcat", "-d|--decompress|--uncompress -c|--stdout|--to-stdout -f|--force -F|--format= -C|--check= "
                      "-T|--threads= -M|--memlimit= --memlimit-decompress= -q|--quiet -v|--verbose -Q|--no-warn "
                      "--single-stream --no-sparse --ignore-check -t|--test -l|--list --robot -h|--help "
                      "-H|--long-help -V|--version", files=True, aliases=("lzcat",), help=())

# A shared library, a Python extension module, an object file or an archive of them.
_LIBRARY = re.compile(r"[^/]*\.(so(\.\d+)*|o|a)")


def _in_trusted_places(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    return in_trusted_places(an, cmd.prog, [a for a in parsed.operands if a.text != "-"])


def _binutils_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if not _in_trusted_places(an, cmd, parsed):
        return False
    for operand in parsed.operands:
        text = operand.text or ""
        if text.startswith("@"):
            an.add(MUTATING, f"{cmd.prog}:response-file", f"`{cmd.prog} {text}` reads more options from `{text[1:]}`")
            return False
        if operand.pattern or not _LIBRARY.fullmatch(text.rsplit("/", 1)[-1]):
            an.add(MUTATING, f"{cmd.prog}:not-a-library",
                   f"`{cmd.prog} {text}` names no shared library or object file (`*.so`, `*.so.N`, `*.o`, `*.a`); "
                   f"only those are accepted")
            return False
    return bool(parsed.operands) or any(u.option.names[0] in ("-v", "-h", "-H") for u in parsed.used)


@_handles("nm", "objdump")
def _binutils(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, NM if cmd.prog == "nm" else OBJDUMP, _binutils_operands)


def _xxd_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if len(parsed.operands) > 1:
        an.write(parsed.operands[1], "`xxd IN OUT`", "xxd")
        return False
    return _in_trusted_places(an, cmd, parsed)


@_handles("xxd")
def _xxd(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, XXD, _xxd_operands)


@_handles("hexdump", "hd")
def _hexdump(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, HEXDUMP, _in_trusted_places)


@_handles("zcat", "gzcat")
def _zcat(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, ZCAT, _in_trusted_places)


@_handles("xzcat", "lzcat")
def _xzcat(an: Analysis, cmd: _Cmd) -> None:
    judge_by_spec(an, cmd, XZCAT, _in_trusted_places)


# cuobjdump (CUDA): the listing and dumping options print; the extracting ones write files.
_CUOBJDUMP_READS = {"--list-elf", "-lelf", "--list-ptx", "-lptx", "--list-text", "-ltext", "--dump-elf", "-elf",
                    "--dump-ptx", "-ptx", "--dump-sass", "-sass", "--dump-resource-usage", "-res-usage",
                    "--dump-elf-symbols", "-symbols", "--sort-functions", "-sort", "--help", "-h", "--version", "-V",
                    "--all-fatbin", "-all"}
_CUOBJDUMP_VALUED = {"--function", "-fun", "--gpu-architecture", "-arch", "--function-index", "-findex"}


@_handles("cuobjdump")
def _cuobjdump(an: Analysis, cmd: _Cmd) -> None:
    files = []
    index = 0
    while index < len(cmd.args):
        arg = cmd.args[index]
        text = arg.text
        name = (text or "").split("=", 1)[0]
        if text is None:
            an.add(MUTATING, "cuobjdump:unknown-option", "`cuobjdump` with a word known only at run time")
            return
        if name in _CUOBJDUMP_VALUED:
            index += 1 if "=" in text else 2
            continue
        if text.startswith("-"):
            if text in _CUOBJDUMP_READS:
                index += 1
                continue
            writes = name.startswith(("--extract", "-x"))
            an.add(MUTATING, "cuobjdump:extract" if writes else "cuobjdump:unknown-option",
                   f"`cuobjdump {text}` extracts the embedded images into files" if writes else
                   f"`cuobjdump {text}`: an option the classifier does not list as a read")
            return
        files.append(arg)
        index += 1
    if files_read_ok(an, "cuobjdump", files) and in_trusted_places(an, "cuobjdump", files):
        an.allow(cmd)


SPECS = [NM, OBJDUMP, XXD, HEXDUMP, ZCAT]
