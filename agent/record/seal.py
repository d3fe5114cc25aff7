"""The transcript's seal: an HMAC-SHA256 per line, under a key that never enters a record.

The hash chain alone shows accidents (a line lost, cut or garbled), not a deliberate edit: whoever
edits a line can recompute every hash after it in a few lines of code. So each line also carries a
MAC under a secret key, as its last field (`"mac":"<64 hex>"`), computed over the line's bytes
without that field. A line holds the hash of the line before it (`prev`), so the MAC of line N
vouches for lines 1..N: a transcript cut short by a kill is sealed up to its last whole line, and
the session_end's MAC seals the whole. The first line names the key (`"seal":{"alg","key_id"}`;
the id is a one-way hash of the key), so a reader can tell "another key" from "an edit".

The key, in this order:
- `UPGRADE_AGENT_RECORD_KEY` (at least 32 characters): one key shared by the machines of a fleet
  or a CI, so each can check the others' records;
- else the file `$XDG_DATA_HOME/upgrade-agent/record.key` (32 random bytes as hex, mode 0600),
  made on the first record this user writes.

What a seal does not prove: anyone who holds the key (this user, root on this machine, every
holder of a shared key) can forge a sealed record, and deleting a whole transcript leaves no trace.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

KEY_ENV = "UPGRADE_AGENT_RECORD_KEY"
ALG = "hmac-sha256"
MIN_SHARED_KEY = 32  # characters of a shared key
_KEY_ID_CONTEXT = b"upgrade-agent record key id\n"
# The MAC is the line's last field, so the sealed bytes are the line without it, closed again.
_MAC_TAIL = re.compile(rb',"mac":"([0-9a-f]{64})"\}$')


class SealKeyError(ValueError):
    """The record key cannot be read or made: one line saying what is wrong and what to do."""


def key_file() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "upgrade-agent" / "record.key"


def key_id_of(key: bytes) -> str:
    """A name for the key that tells keys apart and gives nothing of it away."""
    return hashlib.sha256(_KEY_ID_CONTEXT + key).hexdigest()[:16]


@dataclass(frozen=True)
class Seal:
    key: bytes = field(repr=False)
    text: str = field(repr=False)  # the key as it was given (the env value, the file's hex): what to redact
    source: str  # where it came from: the variable's name or the file's path
    key_id: str = ""

    def __post_init__(self):
        object.__setattr__(self, "key_id", key_id_of(self.key))
        # Keyed once: each line's MAC then costs a copy and one pass over the line.
        object.__setattr__(self, "_keyed", hmac.new(self.key, digestmod=hashlib.sha256))

    def header(self) -> dict:
        """What the first line says of its seal."""
        return {"alg": ALG, "key_id": self.key_id}

    def mac(self, body: bytes) -> str:
        h = self._keyed.copy()  # type: ignore[attr-defined]
        h.update(body)
        return h.hexdigest()

    def seal_line(self, line: bytes) -> bytes:
        """The line (one JSON object, no newline) with its MAC as the last field."""
        return line[:-1] + b',"mac":"' + self.mac(line).encode() + b'"}'

    def check_line(self, line: bytes) -> bool | None:
        """True: the line's MAC is this key's over the rest of it; False: it is not; None: it has none."""
        found = _MAC_TAIL.search(line)
        if found is None:
            return None
        return hmac.compare_digest(found.group(1).decode(), self.mac(line[:found.start()] + b"}"))


def has_mac(line: bytes) -> bool:
    return _MAC_TAIL.search(line) is not None


def load_seal(create: bool) -> Seal | None:
    """This machine's record key: the shared one from the environment, else the user's key file
    (made now when `create` and it is not there yet). None: no key, and none to be made."""
    shared = os.environ.get(KEY_ENV)
    if shared is not None:
        if len(shared) < MIN_SHARED_KEY:
            raise SealKeyError(f"{KEY_ENV} holds {len(shared)} characters: a shared record key needs at least "
                               f"{MIN_SHARED_KEY} (make one with `openssl rand -hex 32`), or unset it to use "
                               f"{key_file()}")
        return Seal(key=shared.encode(), text=shared, source=KEY_ENV)
    path = key_file()
    if not path.exists():
        if not create:
            return None
        _make_key_file(path)
    return _read_key_file(path)


def _read_key_file(path: Path) -> Seal:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SealKeyError(f"cannot read the record key {path}: {getattr(e, 'strerror', None) or e}; make it "
                           f"readable by this user, or set {KEY_ENV}") from None
    if mode & 0o077:
        raise SealKeyError(f"the record key {path} can be read by other users (mode {mode & 0o777:04o}): "
                           f"run `chmod 600 {path}`")
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise SealKeyError(f"the record key {path} is not 64 hex digits: move it away (records it sealed then "
                           "read as sealed by another key) and the next record makes a new one")
    return Seal(key=bytes.fromhex(text), text=text, source=str(path))


def _make_key_file(path: Path) -> None:
    """A new key, 0600, put in place in one step: two processes that make one at once end with one key."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
            try:
                os.link(scratch, path)  # fails when another process put its key there first: that one stands
            except FileExistsError:
                pass
        finally:
            scratch.unlink(missing_ok=True)
    except OSError as e:
        raise SealKeyError(f"cannot make the record key {path}: {e.strerror or e}; make {path.parent} writable "
                           f"by this user, or set {KEY_ENV} to a key of at least {MIN_SHARED_KEY} characters") from None
