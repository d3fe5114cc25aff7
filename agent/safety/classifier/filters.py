"""Commands whose output can be computed from their input (echo, base64 -d, gunzip...), so that
`echo BASE64 | base64 -d | sh` is judged by what it really runs."""

from __future__ import annotations

import base64
import binascii
import bz2
import lzma
import posixpath
import re
import zlib

from agent.safety.classifier.command import _MAX_DECODED
from agent.safety.classifier.words import _ansi_c

# --------------------------------------------------------------------------- data filters


def _run_filter(words: list[str], data: bytes | None) -> bytes | None:
    """Output of a data-only command (echo, printf, base64 -d, rev, tr, gunzip...) given its input."""
    prog = posixpath.basename(words[0])
    args = words[1:]
    try:
        if prog == "echo":
            newline, escapes = True, False
            while args and re.fullmatch(r"-[neE]+", args[0]):
                newline = newline and "n" not in args[0]
                escapes = "e" in args[0] or (escapes and "E" not in args[0])
                args = args[1:]
            text = " ".join(args)
            return ((_ansi_c(text, echo_octal=True) if escapes else text) + ("\n" if newline else "")).encode()
        if prog == "printf":
            if not args:
                return None
            template, values = args[0], args[1:]
            if values and template in ("%s", "%s\n", "%b", "%b\n"):
                tail = "\n" if template.endswith("\n") else ""
                return "".join(_ansi_c(v) if "b" in template else v + tail for v in values).encode()
            if values or "%" in template.replace("%%", ""):
                return None
            return _ansi_c(template).replace("%%", "%").encode()
        if data is None:
            return None
        options = [a for a in args if a.startswith("-")]
        operands = [a for a in args if not a.startswith("-")]
        if prog in ("cat", "tee") and not operands:
            return data
        decode = any(o in ("-d", "--decode", "-D") or re.fullmatch(r"-[a-zA-Z]*d[a-zA-Z]*", o) for o in options)
        if prog in ("base64", "base32") and not operands:
            if not decode:
                return (base64.b64encode if prog == "base64" else base64.b32encode)(data) + b"\n"
            compact = b"".join(data.split())
            if prog == "base64":
                return base64.b64decode(compact + b"=" * (-len(compact) % 4))
            return base64.b32decode(compact + b"=" * (-len(compact) % 8))
        if prog == "xxd" and "-r" in options and any(o in ("-p", "-ps", "-plain") for o in options):
            return binascii.unhexlify(b"".join(data.split()))
        if prog == "rev" and not operands:
            return b"\n".join(line[::-1] for line in data.split(b"\n"))
        if prog == "tr" and not options and len(operands) == 2:
            source, target = _tr_set(operands[0]), _tr_set(operands[1])
            if source is None or target is None or not target:
                return None
            target = target + target[-1] * max(0, len(source) - len(target))
            return data.decode("latin-1").translate(str.maketrans(source, target[: len(source)])).encode("latin-1")
        if prog in ("gunzip", "zcat") or (prog == "gzip" and decode):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, _MAX_DECODED)
        if prog in ("unxz", "xzcat") or (prog == "xz" and decode):
            return lzma.LZMADecompressor().decompress(data, _MAX_DECODED)
        if prog in ("bunzip2", "bzcat") or (prog == "bzip2" and decode):
            return bz2.BZ2Decompressor().decompress(data, _MAX_DECODED)
    except (ValueError, binascii.Error, zlib.error, lzma.LZMAError, OSError, EOFError):
        return None
    return None


# Commands whose output _run_filter can compute from their input.
_FILTERS = frozenset({"echo", "printf", "cat", "tee", "base64", "base32", "xxd", "rev", "tr", "gunzip", "zcat", "gzip",
                      "unxz", "xzcat", "xz", "bunzip2", "bzcat", "bzip2"})


def _tr_set(spec: str) -> str | None:
    """A tr character set with ranges (`a-z`); classes like [:upper:] are not followed."""
    if "[:" in spec or "[=" in spec:
        return None
    text = _ansi_c(spec)
    out: list[str] = []
    index = 0
    while index < len(text):
        if index + 2 < len(text) and text[index + 1] == "-" and ord(text[index]) <= ord(text[index + 2]):
            out.extend(chr(c) for c in range(ord(text[index]), ord(text[index + 2]) + 1))
            index += 3
        else:
            out.append(text[index])
            index += 1
    return "".join(out)
