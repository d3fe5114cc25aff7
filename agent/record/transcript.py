"""Transcripts: append-only JSONL, one event per line, hash-chained, secrets redacted.

Every line is a JSON object with `v` (schema version), `seq`, `t` (unix time), `type`,
`prev` (sha256 of the previous line's bytes; "" for the first) and the event's fields.
Lines are flushed as they are written, so a crash loses at most the line being written,
and `close()` always writes a `session_end` event.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple

SCHEMA_VERSION = 1

# --------------------------------------------------------------------------- redaction

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_PATTERNS = [
    # KEY=value / TOKEN: value forms in commands, env dumps and config files.
    # `==` is a version pin (`tiktoken==0.14.0`), not an assignment.
    # Name parts are bounded so a long run like "keykeykey..." costs linear time, not quadratic.
    # The name ends with the secret word or a _SUFFIX after it (API_KEY_ID), so a tokenizer=, a
    # "Total input tokens:" or a max_total_num_tokens= is not taken for a secret.
    re.compile(r"(?i)\b([A-Z0-9_]{0,40}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)(?:_[A-Z0-9]{1,20}){0,2})"
               r"(\s*[=:](?!=)\s*)([\"']?)([^\s\"']{4,})"),
    # JSON forms: {"token": "..."} and the name/value pairs of an environment ({"name": "X_KEY", "value": "..."}).
    re.compile(r'(?i)("[a-z0-9_-]{0,40}(?:key|token|secret|password|passwd|auth)"\s*:\s*")([^"]{4,})(")'),
    re.compile(r'(?i)("name"\s*:\s*"[a-z0-9_]{0,40}(?:key|token|secret|password|passwd)[a-z0-9_]{0,40}"\s*,\s*"value"\s*:\s*")([^"]*)(")'),
    re.compile(r"(?i)\b(authorization\s*[:=]\s*)(bearer|basic|token)?\s*[^\s\"',]+"),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"\b(?:ghp|gho|ghs|github_pat|hf|xox[abp])_[A-Za-z0-9_]{16,}"),  # GitHub, Hugging Face, Slack
    re.compile(r"(?i)(--password[= ]|--token[= ]|--api-key[= ])(\S+)"),
    re.compile(r"(://[^/\s:@]+:)([^@\s/]+)(@)"),  # passwords in URLs
]
REDACTED = "[REDACTED]"
# Every pattern above needs one of these fragments; text without any is left alone quickly.
_MAYBE_SECRET = re.compile(r"(?i)key|token|secret|passw|auth|bearer|sk-|ghp_|gho_|ghs_|github_pat|hf_|xox|://")


class Redactor:
    """Removes secrets from text: known secret values, and anything shaped like a credential."""

    def __init__(self, secrets: list[str] | None = None, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 6}
        values.update(s for s in (secrets or []) if s and len(s) >= 6)
        # Longest first, so a secret containing another is removed whole.
        self._values = sorted(values, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret and len(secret) >= 6 and secret not in self._values:
            self._values.append(secret)
            self._values.sort(key=len, reverse=True)

    def text(self, s: str) -> str:
        if len(s) < 6:  # too short to hold a credential
            return s
        for v in self._values:
            if v in s:
                s = s.replace(v, REDACTED)
        if _MAYBE_SECRET.search(s) is None:  # one scan rules out the common case
            return s
        p = _PATTERNS
        s = p[0].sub(_assignment, s)
        s = p[1].sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", s)
        s = p[2].sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", s)
        s = p[3].sub(lambda m: f"{m.group(1)}{REDACTED}", s)
        s = p[4].sub(lambda m: f"{m.group(1)} {REDACTED}", s)
        s = p[5].sub(REDACTED, s)
        s = p[6].sub(REDACTED, s)
        s = p[7].sub(lambda m: f"{m.group(1)}{REDACTED}", s)
        s = p[8].sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", s)
        return s

    def value(self, obj: Any) -> Any:
        """Redact every string inside a JSON-like value; keys named like secrets lose their value."""
        t = type(obj)
        if t is str:
            return self.text(obj)
        if t is dict:
            out = {}
            for k, v in obj.items():
                tv = type(v)
                if tv is str:
                    out[k] = REDACTED if v and _secret_key(k) else self.text(v)
                elif tv in _SCALARS:
                    out[k] = v
                else:
                    out[k] = self.value(v)
            return out
        if t is list or t is tuple:
            return [self.value(v) for v in obj]
        return obj


# A count of tokens is a figure, not a credential: max_token=512, TOKEN_LIMIT: 8192.
_FIGURE = re.compile(r"[0-9][0-9.,]*[,;)]?|None|True|False|null|true|false")


def _assignment(m: re.Match) -> str:
    name, value = m.group(1), m.group(4)
    if "token" in name.lower() and "key" not in name.lower() and _FIGURE.fullmatch(value):
        return m.group(0)
    return f"{name}{m.group(2)}{m.group(3)}{REDACTED}"


_SCALARS = (int, float, bool, type(None))
_secret_keys: dict[Any, bool] = {}


# A mapping key that names a secret: it ends with the secret word (api_key, access_token, password);
# "tokenizer", "total_input_tokens" or "keyboard" do not.
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?)?(?:key|token|secret|password|passwd|credentials?|auth)$"
                         r"|^(?:authorization|apikey|passphrase)$")


def _secret_key(key: Any) -> bool:
    """Whether a mapping key names a secret (cached: sessions use few distinct keys)."""
    hit = _secret_keys.get(key)
    if hit is None:
        hit = _secret_keys[key] = isinstance(key, str) and _SECRET_KEY.search(key) is not None
    return hit


# --------------------------------------------------------------------------- writing


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


class _Pending(NamedTuple):
    """A line being written: enough to tell afterwards whether it reached the file."""

    size_before: int
    length: int  # bytes, newline included
    digest: str
    seq_after: int
    closes: bool  # a session_end


class TranscriptWriter:
    """Appends events to a JSONL file. Thread-safe: tool threads and the loop both write.

    The chain's end (hash of the last line, next seq, file size) is one tuple, replaced in one
    assignment. A write cut short (Ctrl-C lands between bytecodes, so right after the write
    returns; or an OSError such as a full disk, possibly after part of the line) leaves a
    pending note; the file's size then tells whether the line is there, and a partial line is
    cut off, before anything else is written.
    """

    def __init__(self, path: Path | None, redactor: Redactor | None = None):
        self.path = path
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        self._chain = ("", 0, 0)  # (prev hash, next seq, file size)
        self._pending: _Pending | None = None
        self._closed = False
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size:
                raise FileExistsError(f"transcript {path} already exists; choose another path")
            self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - held for the session

    @property
    def closed(self) -> bool:
        if self._pending is not None:  # a write cut short: was it the session_end?
            with self._lock:
                if self._pending is not None:
                    self._settle()
        return self._closed

    @property
    def artifacts_dir(self) -> Path | None:
        return None if self.path is None else self.path.with_suffix("").with_name(self.path.stem + ".artifacts")

    def write(self, type_: str, **fields: Any) -> dict:
        """Write one event and return it (as written: redacted)."""
        with self._lock:
            if self._pending is not None:
                self._settle()
            if self._closed:
                raise RuntimeError("transcript is closed")
            prev, seq, size = self._chain
            event = {"v": SCHEMA_VERSION, "seq": seq, "t": round(time.time(), 6), "type": type_, "prev": prev}
            event.update(self.redactor.value(fields))
            if self._file is None:
                self._chain = (prev, seq + 1, size)
                self._closed = type_ == "session_end"
                return event
            try:
                line = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=_json_default).encode()
            except UnicodeEncodeError:  # text that is not valid Unicode: keep it, escaped, rather than crash
                line = json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=_json_default).encode()
            pending = self._pending = _Pending(size, len(line) + 1, line_hash(line), seq + 1, type_ == "session_end")
            try:
                written = self._file.write(line + b"\n")  # unbuffered: on disk (page cache) when this returns
            except OSError:
                self._settle()  # a partial line is cut off now; the error is the caller's
                raise
            # An interrupt from here on leaves `_pending` set, and the next write settles by the file's size.
            if written != pending.length:
                self._settle()
                raise OSError(f"short write to {self.path}: {written} of {pending.length} bytes; the line was cut off")
            self._advance(pending)
            return event

    def _advance(self, pending: _Pending) -> None:
        self._chain = (pending.digest, pending.seq_after, pending.size_before + pending.length)
        if pending.closes:
            self._closed = True
            self._file.close()
        self._pending = None

    def _settle(self) -> None:
        """Move the chain on if the pending line is whole in the file; cut it off if it is partial.

        Safe to run again when interrupted itself: every step sets state, none adds to it.
        """
        pending = self._pending
        assert pending is not None and self._file is not None
        if self._file.closed:  # the session_end was settled already
            self._closed = True
        else:
            size = os.fstat(self._file.fileno()).st_size
            if size == pending.size_before + pending.length:
                self._advance(pending)
                return
            if size != pending.size_before:
                os.ftruncate(self._file.fileno(), pending.size_before)
        self._pending = None


def _json_default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, bytes):
        return o.decode("utf-8", "replace")
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


# --------------------------------------------------------------------------- reading


class TranscriptError(ValueError):
    pass


def iter_events(path: Path) -> Iterator[dict]:
    """Events of a transcript, one at a time (constant memory)."""
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise TranscriptError(f"{path}:{n}: not a JSON line ({e.msg})") from None


@dataclass
class VerifyReport:
    ok: bool
    events: int
    problems: list[str]
    ended: bool
    status: str | None


def verify(path: Path) -> VerifyReport:
    """Check every line parses, the hash chain holds, seq is contiguous and an end event closes it."""
    problems: list[str] = []
    prev = ""
    count = 0
    ended = False
    status = None
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip(b"\n")
            if not line:
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(f"line {n}: not valid JSON ({e.msg})")
                prev = line_hash(line)
                continue
            if ended:
                problems.append(f"line {n}: event after session_end")
            if ev.get("prev") != prev:
                problems.append(f"line {n - 1} was changed or removed: line {n} holds a different hash of it")
            if ev.get("seq") != count:
                problems.append(f"line {n}: seq {ev.get('seq')} where {count} was expected")
            if ev.get("v") != SCHEMA_VERSION:
                problems.append(f"line {n}: schema version {ev.get('v')} (this reader knows {SCHEMA_VERSION})")
            if ev.get("type") == "session_end":
                ended = True
                status = ev.get("status")
            prev = line_hash(line)
            count += 1
    if not ended:
        problems.append("no session_end event: the session did not close its transcript")
    return VerifyReport(ok=not problems, events=count, problems=problems, ended=ended, status=status)


def default_transcript_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "upgrade-agent" / "transcripts"


def new_transcript_path(prefix: str = "session") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = default_transcript_dir()
    path = d / f"{prefix}-{stamp}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = d / f"{prefix}-{stamp}-{n}.jsonl"
    return path
