"""Transcripts: append-only JSONL, one event per line, hash-chained, secrets redacted.

Every line is a JSON object with `v` (schema version), `seq`, `t` (unix time), `type`,
`prev` (sha256 of the previous line's bytes; "" for the first) and the event's fields.
Lines are flushed as they are written, so a crash loses at most the line being written,
and `close()` always writes a `session_end` event. Every event passes through the one
redactor (agent/record/redact.py) before it is written.

A record that cannot be written (a full disk, a read-only filesystem, an I/O error; the
transcript or an artifact beside it) raises `RecordWriteError` with one line saying what to
do. From then on only the `session_end` is still tried: a session must not run steps it
cannot record, and the lines already written stay a valid chain.

Each line is also sealed: an HMAC under this machine's record key is its last field, and the first
line names the key (agent/record/seal.py says why and what that proves). `verify` says which of
sealed, not sealed, sealed by another key, or seal broken at line N a transcript is.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from agent.errors import RecordWriteError

# The redactor's home is agent/record/redact.py; these names stay importable from here.
from agent.record.redact import REDACTED, Redactor, StreamRedactor  # noqa: F401
from agent.record.seal import KEY_ENV, Seal, SealKeyError, has_mac, load_seal
from tools.base import ArtifactStore

SCHEMA_VERSION = 1

# Transcripts opened whose first event is not written yet. An interrupt in that window (a session is being
# built) leaves an empty file that no reader can verify; the interrupt's handler takes such files away, since
# nothing happened that they could record (discard_unstarted).
_UNSTARTED: set["TranscriptWriter"] = set()


def discard_unstarted() -> list[Path]:
    """Remove the files of transcripts that were opened and never written to; their paths."""
    removed = []
    for writer in list(_UNSTARTED):
        _UNSTARTED.discard(writer)
        if writer._chain[1] == 0 and writer._file is not None and writer.path is not None:
            try:
                writer._file.close()
                if writer.path.stat().st_size == 0:
                    writer.path.unlink()
                    removed.append(writer.path)
            except OSError:
                pass
    return removed

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

    def __init__(self, path: Path | None, redactor: Redactor | None = None, seal: Seal | None | bool = True):
        """`seal`: True (this machine's record key, made on first use), a Seal, or None/False (unsealed:
        only for records nobody reads as proof, such as a replay's, which has no file)."""
        self.path = path
        self.redactor = redactor or Redactor()
        self._seal: Seal | None = None
        if path is not None and seal:
            try:
                self._seal = load_seal(create=True) if seal is True else seal
            except SealKeyError as e:
                raise RecordWriteError(str(e)) from None
            self.redactor.add(self._seal.text)  # the key never reaches the record, an artifact or the screen
        self._lock = threading.Lock()
        self._chain = ("", 0, 0)  # (prev hash, next seq, file size)
        self._pending: _Pending | None = None
        self._closed = False
        self._file = None
        # Why the record can no longer be kept whole (the first reason), once that happened.
        self._failure: str | None = None
        self._artifacts = self.artifacts_dir
        if path is not None:
            self._file = self._open(path)
            _UNSTARTED.add(self)

    def _open(self, path: Path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            taken = path.exists() and path.stat().st_size > 0
            if not taken:
                return open(path, "ab", buffering=0)  # noqa: SIM115 - held for the session
        except OSError as e:
            raise RecordWriteError(write_failure_line(f"the transcript {path}", path, e)) from None
        raise FileExistsError(f"transcript {path} already exists; choose another path")

    @property
    def closed(self) -> bool:
        if self._pending is not None:  # a write cut short: was it the session_end?
            with self._lock:
                if self._pending is not None:
                    self._settle_or_fail()
        return self._closed

    @property
    def artifacts_dir(self) -> Path | None:
        return None if self.path is None else self.path.with_suffix("").with_name(self.path.stem + ".artifacts")

    def write(self, type_: str, **fields: Any) -> dict:
        """Write one event and return it (as written: redacted).

        RecordWriteError when the line cannot be written, and for every event but a session_end
        once one could not be. An artifact of this transcript that could not be written raises it
        too, after the next event is written (when it still can be: it records what happened).
        """
        with self._lock:
            if self._pending is not None:
                self._settle_or_fail()
            if self._closed:
                raise RuntimeError("transcript is closed")
            if self._failure is not None and type_ != "session_end":
                raise RecordWriteError(self._failure)
            artifact_lost = self._artifact_lost()
            prev, seq, size = self._chain
            event = {"v": SCHEMA_VERSION, "seq": seq, "t": round(time.time(), 6), "type": type_, "prev": prev}
            event.update(self.redactor.value(fields))
            if seq == 0 and self._seal is not None:
                event["seal"] = self._seal.header()
            if self._file is None:
                self._chain = (prev, seq + 1, size)
                self._closed = type_ == "session_end"
                if artifact_lost:
                    raise RecordWriteError(self._failure)
                return event
            try:
                line = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=_json_default).encode()
            except UnicodeEncodeError:  # text that is not valid Unicode: keep it, escaped, rather than crash
                line = json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=_json_default).encode()
            if self._seal is not None:
                line = self._seal.seal_line(line)
            pending = self._pending = _Pending(size, len(line) + 1, line_hash(line), seq + 1, type_ == "session_end")
            try:
                self._write_whole(line + b"\n")  # unbuffered: on disk (page cache) when this returns
            except OSError as e:
                failure = self._failed(f"event {seq}, {type_}", e)
                self._settle_or_fail()  # a partial line is cut off now
                raise failure from None
            # An interrupt from here on leaves `_pending` set, and the next write settles by the file's size.
            _UNSTARTED.discard(self)
            self._advance(pending)
            if artifact_lost:  # this event is kept (it says what happened); the session stops here
                raise RecordWriteError(self._failure)
            return event

    def _write_whole(self, data: bytes) -> None:
        """All of `data`, or the OS's reason why not: a write cut short by a filling disk is followed
        by one for the rest, which then fails with ENOSPC (or goes through)."""
        written = self._file.write(data)
        while written < len(data):
            more = self._file.write(data[written:])
            if not more:
                raise OSError(errno.EIO, f"the file took {written} of {len(data)} bytes and no more")
            written += more

    def _failed(self, what: str, error: OSError) -> RecordWriteError:
        """Remember that the record cannot be kept (the first reason stands) and give the error to raise."""
        if self._failure is None:
            self._failure = write_failure_line(f"the transcript {self.path} ({what})", self.path, error)
        return RecordWriteError(self._failure)

    def _artifact_lost(self) -> bool:
        """Whether an artifact of this transcript could not be written since the last event: that stops
        the session as a line that cannot be written does (and it was the first failure, so it is named)."""
        failed = ArtifactStore.failure(self._artifacts)
        if failed is None or self._failure is not None:
            return False
        target, error = failed
        self._failure = write_failure_line(f"the artifact {target}", target, error)
        return True

    def _advance(self, pending: _Pending) -> None:
        self._chain = (pending.digest, pending.seq_after, pending.size_before + pending.length)
        if pending.closes:
            self._closed = True
            self._file.close()
        self._pending = None

    def _settle_or_fail(self) -> None:
        try:
            self._settle()
        except OSError as e:  # the file cannot even be measured or cut: the disk itself failed
            raise self._failed("cutting off a partial line", e) from None

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


def write_failure_line(what: str, path: Path, error: OSError) -> str:
    """One line for a record that could not be written: what, the OS's reason, and what to do."""
    name = errno.errorcode.get(error.errno or 0)
    reason = f"{error.strerror or error}" + (f" ({name})" if name else "")
    return f"could not write {what}: {reason}; {_what_to_do(error.errno, Path(path))}"


def _what_to_do(code: int | None, path: Path) -> str:
    where = _filesystem_of(path)
    if code == errno.ENOSPC:
        return f"free space on {where} or choose another path with --transcript"
    if code == errno.EDQUOT:
        return f"free space within your disk quota on {where} or choose another path with --transcript"
    if code == errno.EROFS:
        return f"{where} is mounted read-only: choose another path with --transcript"
    if code in (errno.EACCES, errno.EPERM):
        return f"{path.parent} is not writable by this user: choose another path with --transcript"
    if code == errno.EIO:
        return f"the disk under {where} reported an I/O error (see dmesg): choose another path with --transcript"
    return "choose another path with --transcript"


def _filesystem_of(path: Path) -> Path:
    """The mount point of the filesystem that holds `path` (or would hold it)."""
    here = Path(os.path.abspath(path))
    while not os.path.exists(here) and here != here.parent:
        here = here.parent
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return here


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


def first_event(path: Path) -> dict | None:
    """A transcript's first event (its session_start), read alone; None when the file holds none."""
    try:
        with open(path, "rb") as f:
            event = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    return event if isinstance(event, dict) else None


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


# What `verify` found of the seal.
SEALED = "sealed"          # every line carries this machine's key's MAC
UNSEALED = "unsealed"      # no seal: written before sealing, or by a writer without one
OTHER_KEY = "other_key"    # sealed by a key this machine does not hold as its own
NO_KEY = "no_key"          # sealed, but this machine has no record key to check it with
BROKEN = "broken"          # a line's MAC is not this key's, or missing: changed after it was written
ACCEPT_UNSEALED = "--accept-unsealed"


@dataclass
class VerifyReport:
    ok: bool  # the chain holds, an end event closes it, and no seal is broken (an unsealed record can be ok)
    events: int
    problems: list[str]
    ended: bool
    status: str | None
    seal: str = UNSEALED
    seal_line: int | None = None  # the first line whose seal is broken
    key_id: str | None = None  # the key the first line names
    cut_line: bool = False  # a last line without its newline that does not parse (a kill while writing) was left out

    @property
    def sealed(self) -> bool:
        return self.seal == SEALED

    def damage(self) -> list[str]:
        """The problems but a missing end (how a killed session stops, not damage)."""
        return [p for p in self.problems if not p.startswith("no session_end")]

    def seal_summary(self) -> str:
        """What the seal proves, in one honest line."""
        if self.seal == SEALED:
            return "sealed by this machine's key: intact" + (" up to its last whole line" if self.cut_line else "")
        if self.seal == BROKEN:
            return f"seal broken at line {self.seal_line}: the record was changed after it was written"
        why = {UNSEALED: "written before sealing, or its seal removed",
               OTHER_KEY: f"sealed by another key ({self.key_id}): another machine's, or this one's before a new key",
               NO_KEY: f"sealed by key {self.key_id}, and this machine has no record key to check it"}[self.seal]
        chain = "hash chain intact but " if not self.damage() else ""
        return (f"{chain}NOT sealed by this machine's key ({why}): an edit with recomputed hashes "
                f"would not be detected" + (f"; set {KEY_ENV} to the key that wrote it to check the seal"
                                            if self.seal in (OTHER_KEY, NO_KEY) else ""))


def verify(path: Path, seal: Seal | None | bool = True) -> VerifyReport:
    """Check every line parses, the hash chain holds, seq is contiguous, an end event closes it, and the
    seal: every line's MAC under this machine's record key (`seal`: True reads it, never makes one).

    A last line cut short by a kill (no newline, not JSON) is left out: the lines before it are checked."""
    problems: list[str] = []
    prev = ""
    count = 0
    ended = False
    status = None
    try:
        local = load_seal(create=False) if seal is True else (seal or None)
    except SealKeyError:
        local = None  # an unusable key checks nothing: said as "no record key"
    checking: Seal | None = None
    seal_problems: list[str] = []
    state, seal_line, key_id, cut = UNSEALED, None, None, False
    first = True
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip(b"\n")
            if not line:
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as e:
                if not raw.endswith(b"\n"):  # only the last piece lacks it: a line a kill cut short
                    cut = True
                    break
                problems.append(f"line {n}: not valid JSON ({e.msg})")
                ev = None
            if first:
                first = False
                header = ev.get("seal") if isinstance(ev, dict) else None
                if isinstance(header, dict):
                    key_id = str(header.get("key_id"))
                    if local is None:
                        state = NO_KEY
                    elif header.get("alg") != "hmac-sha256" or key_id != local.key_id:
                        state = OTHER_KEY
                    else:
                        state, checking = SEALED, local
            if state == SEALED and checking is not None:
                good = checking.check_line(line)
                if not good:
                    state, seal_line = BROKEN, n
                    seal_problems.append(f"line {n}: seal broken: " + ("the line has no MAC, though its record is sealed "
                                    "(a line added or rewritten)" if good is None else "its MAC is not this key's "
                                    "over it (the line was changed; the hashes after it may have been recomputed)"))
            elif state == UNSEALED and has_mac(line):
                # MACs without the first line's header: the header was taken out to pass as unsealed.
                state, seal_line = BROKEN, 1
                seal_problems.append(f"line 1: seal broken: its seal header was removed (line {n} carries a MAC)")
            if ev is None:
                prev = line_hash(line)
                continue
            if ended:
                problems.append(f"line {n}: event after session_end")
            if ev.get("prev") != prev:
                problems.append(f"line {n - 1} was changed or removed: line {n} holds a different hash of it" if count
                                else f"line {n}: not the start of a record's chain (its prev is not empty)")
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
    problems += seal_problems  # after the chain's: an edit in place is named first by the hash it broke
    return VerifyReport(ok=not problems, events=count, problems=problems, ended=ended, status=status,
                        seal=state, seal_line=seal_line, key_id=key_id, cut_line=cut)


def untrusted(path: Path, report: VerifyReport, accept_unsealed: bool, use: str) -> str | None:
    """Why a record cannot be the ground of `use` (a recipe, a resumed run), in one line; None: it can.

    A broken chain or seal is refused always. A record not sealed by this machine's key (an older one,
    another machine's, or one whose seal was stripped: they cannot be told apart) only with
    --accept-unsealed, since an edit with recomputed hashes would not show in it."""
    damage = report.damage()
    if damage:
        return f"{path}: the record is not intact ({damage[0]}); {use} is read only from a record that verifies"
    if report.sealed or accept_unsealed:
        return None
    return (f"{path}: {report.seal_summary()}; {use} is read only from a record sealed by this machine's key: "
            f"run again with {ACCEPT_UNSEALED} if you trust this file as it is")


def default_transcript_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "upgrade-agent" / "transcripts"


def session_index() -> Path:
    """The list of sessions written outside the transcript directory (`--transcript`, `agent demo --dir`, a
    rollout's `--dir`), one path a line, so that `agent sessions` finds every session the product wrote."""
    return default_transcript_dir().parent / "sessions.index"


def remember_session(path: Path) -> None:
    """Add a session's transcript to the index, unless it lies in the transcript directory (listed anyway). A
    listing is a convenience: a session never fails for it (a read-only data directory, a full disk)."""
    where = Path(os.path.abspath(path))
    if where.parent == default_transcript_dir() or "\n" in str(where):
        return
    index = session_index()
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        with open(index, "a", encoding="utf-8") as f:
            f.write(f"{where}\n")
    except OSError:
        pass


def new_transcript_path(prefix: str = "session") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = default_transcript_dir()
    path = d / f"{prefix}-{stamp}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = d / f"{prefix}-{stamp}-{n}.jsonl"
    return path


# --------------------------------------------------------------------------- parts of one session


@dataclass
class Part:
    """One transcript file as read back for `agent resume`: its events, and where its chain ends."""

    path: Path
    events: list[dict]
    last_hash: str  # the hash of its last whole line: what a resumed part links to
    last_seq: int
    cut_line: bool  # a partial last line (the process died while writing it) was left out

    @property
    def end(self) -> dict | None:
        return self.events[-1] if self.events and self.events[-1].get("type") == "session_end" else None

    def link(self) -> dict:
        """What the resumed part's session_start keeps of this one (`resumes`)."""
        return {"path": str(self.path.absolute()), "last_hash": self.last_hash, "seq": self.last_seq}


def read_part(path: Path) -> Part:
    """A transcript's whole lines; a last line without its newline that does not parse (what a process
    killed while writing leaves) is left out. Any other line that does not parse is a TranscriptError."""
    events: list[dict] = []
    last_hash, cut = "", False
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines):  # the last piece, with no newline after it
                cut = True
                break
            raise TranscriptError(f"{path}:{n}: not a JSON line ({e.msg})") from None
        last_hash = line_hash(line)
    return Part(Path(path), events, last_hash, events[-1].get("seq", -1) if events else -1, cut)


def linked_part(path: Path, start: dict) -> tuple[Path | None, str | None]:
    """The earlier part a resumed transcript links to, and the problem with the link (None: it holds).

    The earlier file is looked for where it was, then beside this one (the two moved together)."""
    link = start.get("resumes")
    if not isinstance(link, dict):
        return None, None
    recorded = Path(str(link.get("path", "")))
    for candidate in (recorded, Path(path).parent / recorded.name):
        if candidate.is_file():
            break
    else:
        return recorded, f"the earlier part {recorded} is not there (nor beside this transcript)"
    try:
        part = read_part(candidate)
    except (OSError, TranscriptError) as e:
        return candidate, f"the earlier part {candidate} cannot be read: {e}"
    at = next((ev for ev in part.events if ev.get("seq") == link.get("seq")), None)
    if at is None or part.last_seq != link.get("seq"):
        return candidate, (f"the earlier part {candidate} ends at seq {part.last_seq}, the link names seq "
                           f"{link.get('seq')}: it was changed after this part began")
    if part.last_hash != link.get("last_hash"):
        return candidate, f"the earlier part {candidate} was changed after this part began: its last line's hash differs"
    # Its own chain must hold too (a killed part has no session_end: that is how it stopped, not damage).
    damage = verify(candidate).damage()
    if damage:
        return candidate, f"the earlier part {candidate} was changed after this part began: {damage[0]}"
    return candidate, None
