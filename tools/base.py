"""What every tool shares: risk classes, the Tool contract, schemas, truncation, artifacts.

A tool file holds only what is particular to that tool: an `Args` model, a `Result`
model, `action(args)` (what the call will do, on which host, and how risky it is) and
`run(ctx, args)`. Validation, the strict JSON schema, output truncation for the model
and artifact files all live here, once.
"""

from __future__ import annotations

import codecs
import enum
import hashlib
import inspect
import json
import posixpath
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# --------------------------------------------------------------------------- risk


class RiskClass(str, enum.Enum):
    """How much a step can change a host. Ordered: a later class is riskier."""

    READ_ONLY = "read-only"
    MUTATING = "mutating"
    DESTRUCTIVE = "destructive"
    FORBIDDEN = "forbidden"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: "RiskClass") -> "RiskClass":
        """The riskier of the two: detectors may raise a class, never lower it."""
        return self if self.rank >= other.rank else other


_RANK = {RiskClass.READ_ONLY: 0, RiskClass.MUTATING: 1, RiskClass.DESTRUCTIVE: 2, RiskClass.FORBIDDEN: 3}


class Risk(BaseModel):
    """A risk class with the rule that produced it, so every decision can be audited."""

    model_config = ConfigDict(frozen=True)

    cls: RiskClass
    rule: str
    reason: str
    # The decoded form of an obfuscated command (base64 pipe, `bash -c '...'`), when one was found.
    decoded: str | None = None
    # Another host an option of the command makes it act on (`systemctl -H root@h`, `docker -H ...`):
    # the gate treats the step as outside the session's hosts, whatever its class.
    reaches: str | None = None


class Workload(BaseModel):
    """A benchmark's command line: the gate reads it with the workload rules, where the entry points
    of sglang, vllm and the project's bench scripts count as read-only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class Action(BaseModel):
    """What one tool call will do, as the safety gate sees it.

    `subject` is the exact thing an approval binds to: the shell command for
    `ssh_exec`, a canonical one-line description for typed tools. When `risk` is
    None, `subject` is a shell command and the gate classifies it itself. Every field is
    typed, so a misspelt one is an error where the action is built, never a silent fallback
    to plain classification.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str | None
    subject: str
    risk: Risk | None = None
    # The call's arguments that change what the tool does (the tool's `pinned`), in a canonical form
    # (a host path as a file:// URL, no trailing slash, a default filled in): what a goal file's tool
    # authorization matches, by meaning rather than spelling.
    args: dict[str, Any] = Field(default_factory=dict)
    # The value each optional one of those arguments has when the call leaves it out, in the same form:
    # an argument an authorization does not name must keep it.
    defaults: dict[str, Any] = Field(default_factory=dict)
    # A program the model chose that the tool will run (an interpreter): the gate classifies it too.
    interpreter: str | None = None
    # A benchmark's command line (run_bench), classified by the workload rules instead of `subject`.
    workload: Workload | None = None
    # Needs its host alone even when read-only (a benchmark must not share the GPUs with another).
    exclusive: bool = False
    # The label a benchmark keeps its result under (run_bench): a baseline's label is refused once its host
    # has changed, as a baseline measured after the change would compare the change with itself.
    label: str | None = None
    # Run outside the read sandbox (ssh_exec's outside_sandbox): the kernel no longer stops a change, so the
    # gate holds the command to a change's terms (a verified backup and an approval) even when it reads.
    outside_sandbox: bool = False


# --------------------------------------------------------------------------- errors


class ToolError(Exception):
    """A failure written for the model: what went wrong and what to do next."""


class _RepeatedKey(Exception):
    pass


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise _RepeatedKey(key)
        seen[key] = value
    return seen


class ToolUnavailable(ToolError):
    """The tool cannot work in this setup (web_search without its API key): nothing was attempted,
    so the call is no failed step; the session goes on without it."""


# Set for every pip command the tools run: no version check, no prompt, no colour codes in what is recorded.
PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_COLOR": "1"}


class BackupRecord(BaseModel):
    """A verified backup, as the safety layer's ledger keeps it.

    A tool that takes a backup returns one of these in its Result's `backup` field;
    the loop registers it, so a replayed session rebuilds the same ledger.
    """

    backup_id: str
    host: str
    kind: str  # e.g. "pip-freeze"
    target: str  # what was backed up, e.g. the interpreter path
    created_at: float
    remote_dir: str
    local_dir: str | None = None
    files: dict[str, str] = Field(default_factory=dict)  # file name -> sha256
    verified: bool = False
    package_count: int | None = None
    # Whether a restore could fetch every pin again, as the backup's rehearsal found (None: not rehearsed).
    rehearsed: bool | None = None
    rehearsal: str | None = None
    rehearsed_with: str | None = None  # the mirror the rehearsal resolved from (a restore's index_url)


# --------------------------------------------------------------------------- context


class ArtifactStore:
    """Whole outputs, kept as files beside the transcript; the model sees a truncation.

    Callers pass text through the session's redactor (`ToolContext.redact`) before it is saved.
    A write that fails (a full disk, a read-only filesystem) saves nothing, leaves no partial file
    behind, and is remembered: the session's transcript writer looks it up (`failure`) and stops
    the session at its next event, since its record is no longer whole. Later saves of the same
    store are not tried.
    """

    # The first failed write of each store root, kept per process: the transcript writer gives the
    # store its root (its own artifacts folder) but does not hold the store, so it looks it up here.
    _failures: ClassVar[dict[Path, tuple[Path, OSError]]] = {}

    def __init__(self, root: Path | None):
        self.root = root
        self._lock = threading.Lock()
        self._counter = 0

    @classmethod
    def failure(cls, root: Path | None) -> tuple[Path, OSError] | None:
        """The file that could not be written under `root`, and why; None if every write went through."""
        if not cls._failures or root is None:
            return None
        return cls._failures.get(root)

    def save(self, name: str, data: bytes | str) -> str | None:
        """Write one artifact and return its path relative to the store root (None if disabled or failed)."""
        if self.root is None or self.root in self._failures:
            return None
        if isinstance(data, str):
            data = data.encode()
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80]
        with self._lock:
            self._counter += 1
            rel = f"{self._counter:05d}-{safe}"
        target = self.root / rel
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as e:
            self._failed(target, e)
            return None
        return f"{self.root.name}/{rel}"

    def subdir(self, name: str) -> tuple[Path, str] | None:
        """A directory of its own beside the transcript (a backup's local copy), or None if disabled
        or it could not be made: its path, and its name relative to the transcript's folder (what a
        record should keep)."""
        if self.root is None or self.root in self._failures:
            return None
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
        try:
            (self.root / safe).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._failed(self.root / safe, e)
            return None
        return self.root / safe, f"{self.root.name}/{safe}"

    def save_folder(self, name: str, files: dict[str, bytes]) -> tuple[Path, str] | None:
        """Files in a directory of their own beside the transcript (a backup's local copy), written
        whole or not at all; as `subdir` returns, or None if disabled or a file could not be written."""
        made = self.subdir(name)
        if made is None:
            return None
        folder, _ = made
        for file_name, data in files.items():
            try:
                (folder / file_name).write_bytes(data)
            except OSError as e:
                self._failed(folder / file_name, e)
                for written in files:  # a copy that is not whole is no copy: none of it stays
                    _remove(folder / written)
                return None
        return made

    def _failed(self, target: Path, error: OSError) -> None:
        _remove(target)  # a partial file would only take the space that the transcript's last lines need
        ArtifactStore._failures.setdefault(self.root, (target, error))


def _remove(path: Path) -> None:
    try:
        if path.is_file():
            path.unlink()
    except OSError:  # the disk that failed the write may fail this too; the failure is recorded already
        pass


class HostsProvider(Protocol):
    def get(self, name: str) -> Any: ...


@dataclass
class ToolContext:
    """What a running tool may use. Built by the loop, one per call."""

    hosts: HostsProvider
    artifacts: ArtifactStore
    call_id: str = "call"
    cancel: threading.Event = field(default_factory=threading.Event)
    # Live progress to listeners (UI): emit("output", {"stream": "stdout", "text": ...}).
    emit: Callable[[str, dict], None] = lambda kind, data: None
    # Session-scoped state shared by calls of the same tool (e.g. run_bench's labelled results).
    store: dict[str, Any] = field(default_factory=dict)
    # Secrets to keep out of anything a tool writes (backups, artifacts).
    redact: Callable[[str], str] = lambda text: text
    # Why `cancel` is set, worded to follow "cancelled": the operator's Ctrl-C, or the time budget.
    cancel_reason: Callable[[], str] = lambda: "by the operator"
    # A verified backup this session took, by id (restore_backup checks the host's copy against it).
    known_backup: Callable[[str], BackupRecord | None] = lambda backup_id: None


class OutputForwarder:
    """A Host.run `on_output` that passes live output to the context's listeners as text.

    Multi-byte characters split between chunks stay whole; call `flush()` when the command ends.
    """

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self.decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}

    def __call__(self, stream: str, chunk: bytes) -> None:
        text = self.decoders[stream].decode(chunk)
        if text:
            self.ctx.emit("output", {"stream": stream, "text": text})

    def flush(self) -> None:
        for stream, decoder in self.decoders.items():
            text = decoder.decode(b"", final=True)
            if text:
                self.ctx.emit("output", {"stream": stream, "text": text})


def run_live(ctx: ToolContext, host: Any, command: str, **kwargs: Any) -> Any:
    """`host.run(command, **kwargs)` with its output shown live to the context's listeners."""
    forward = OutputForwarder(ctx)
    result = host.run(command, on_output=forward, **kwargs)
    forward.flush()
    return result


# --------------------------------------------------------------------------- tools


def file_url(path_or_url: str) -> str:
    """A host path and its file:// URL as one form (file:///srv/x); other URLs as they are."""
    if path_or_url.startswith("/"):
        return "file://" + norm_path(path_or_url)
    if path_or_url.startswith("file://"):
        return "file://" + norm_path(path_or_url[len("file://"):] or "/")
    return path_or_url


def norm_path(path: str) -> str:
    """/usr/local//cuda-13.0/ and /usr/local/./cuda-13.0 as /usr/local/cuda-13.0 (a pattern's `*` kept)."""
    if not path.startswith("/"):
        return path
    return posixpath.normpath(path) if path != "/" else "/"


class Tool:
    """Base class of a typed tool. Subclasses set `name`, `Args`, `Result`; docstring = description."""

    name: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    Result: ClassVar[type[BaseModel]]
    # The arguments that change what the tool does: its Action carries them, and a goal file's tool
    # authorization must name the required ones and may name the others (which otherwise keep their default).
    pinned: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def canonical(cls, name: str, value: Any) -> Any:
        """An argument's value in the form authorizations compare (the same for the call and the rule)."""
        return value

    @classmethod
    def description(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or cls.name)

    def action(self, args: BaseModel) -> Action:  # pragma: no cover - every tool overrides
        raise NotImplementedError

    def run(self, ctx: ToolContext, args: BaseModel) -> BaseModel:  # pragma: no cover
        raise NotImplementedError

    def read_ports(self, args: BaseModel) -> list[int] | None:
        """The loopback ports this tool's read may reach, where its arguments say exactly which; None: the read
        sandbox relays the ports its arguments' text names (tools/sandbox loopback_ports)."""
        return None

    def render(self, result: BaseModel) -> str:
        """The result as the model reads it: its JSON, cut to head and tail if it is long (the whole
        result is in the transcript). Tools with large text override this to cut it where it makes sense."""
        return truncate_for_model(result.model_dump_json(exclude_none=True))

    # -- schema and validation, shared by every tool

    @classmethod
    def schema(cls) -> dict:
        """The OpenAI function-tool schema, strict mode, generated from `Args`."""
        return {
            "type": "function",
            "function": {
                "name": cls.name,
                "description": cls.description(),
                "parameters": strict_schema(cls.Args),
                "strict": True,
            },
        }

    @classmethod
    def parse_args(cls, raw: str | dict | None) -> BaseModel:
        """Validate raw model arguments; raise ArgumentError with a message for the model."""
        if raw is None or raw == "":
            data: Any = {}
        elif isinstance(raw, dict):
            data = raw
        else:
            try:
                data = json.loads(raw, object_pairs_hook=_no_repeated_keys)
            except json.JSONDecodeError as e:
                raise ArgumentError(
                    f"arguments of {cls.name} are not valid JSON ({e.msg} at position {e.pos}); "
                    f"send one JSON object matching the tool's schema"
                ) from None
            except _RepeatedKey as e:
                # The gate and the tool would read the last value, a log or a reviewer the first.
                raise ArgumentError(f"arguments of {cls.name} name {e.args[0]!r} twice; send each argument "
                                    "once") from None
            except (ValueError, RecursionError) as e:  # a 5,000-digit number, arrays nested thousands deep
                raise ArgumentError(f"arguments of {cls.name} cannot be read ({type(e).__name__}: "
                                    f"{str(e)[:120]}); send one plain JSON object matching the tool's schema") from None
        if not isinstance(data, dict):
            raise ArgumentError(f"arguments of {cls.name} must be a JSON object, got {type(data).__name__}")
        # Strict schemas make every field required and nullable; null means "use the default".
        data = {k: v for k, v in data.items() if not (v is None and _has_non_null_default(cls.Args, k))}
        data = _pairs_to_maps(cls.Args, data)
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ArgumentError(f"arguments of {cls.name} hold text that is not valid Unicode (a lone surrogate "
                                f"escape such as \\ud83d); send plain UTF-8 text") from None
        try:
            return cls.Args.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in e.errors()
            )
            raise ArgumentError(f"invalid arguments for {cls.name}: {problems}") from None


class ArgumentError(ValueError):
    """A tool call the model got wrong; the message is returned to the model."""


class StrictArgs(BaseModel):
    """Base for tool Args: unknown keys are errors, so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid")


def _has_non_null_default(model: type[BaseModel], key: str) -> bool:
    f = model.model_fields.get(key)
    return f is not None and not f.is_required()


def strict_schema(model: type[BaseModel]) -> dict:
    """JSON schema in OpenAI's strict dialect: every property required, no extras, optionals nullable."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(n) for n in node]
        if not isinstance(node, dict):
            return node
        if node.get("type") == "object" and "properties" in node:
            # Defaults move into the description before the children lose them.
            required = set(node.get("required", []))
            props = {}
            for key, prop in node["properties"].items():
                prop = dict(prop)
                if (key not in required and prop.get("default") is not None
                        and "default" not in prop.get("description", "").lower()):
                    desc = prop.get("description", "")
                    prop["description"] = (desc + f" (default {json.dumps(prop['default'])})").strip()
                prop = fix(prop)
                props[key] = prop if key in required else _nullable(prop)
            node = {**node, "properties": props, "required": list(props), "additionalProperties": False}
        if _is_map(node):
            return _map_as_pairs(node, fix)
        node = {k: (v if k == "properties" else fix(v)) for k, v in node.items()
                if k not in ("title", "default") and k not in _UNSUPPORTED_IN_STRICT}
        return node

    out = fix(schema)
    if defs:
        out["$defs"] = {k: fix(v) for k, v in defs.items()}
    return out


# Keywords OpenAI's strict mode rejects; pydantic still checks them when the call arrives.
_UNSUPPORTED_IN_STRICT = {"minLength", "maxLength", "patternProperties", "propertyNames", "minProperties",
                          "maxProperties", "uniqueItems", "contains", "minContains", "maxContains"}


def _is_map(node: dict) -> bool:
    """A free-form mapping (dict[str, str]): strict mode only allows objects with fixed keys."""
    return node.get("type") == "object" and "properties" not in node and isinstance(
        node.get("additionalProperties"), dict)


def _map_as_pairs(node: dict, fix) -> dict:
    """Show a mapping to the model as a list of {name, value}; `parse_args` turns it back."""
    out = {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "value": fix(node["additionalProperties"])},
        "required": ["name", "value"], "additionalProperties": False}}
    if "description" in node:
        out["description"] = node["description"]
    return out


def _pairs_to_maps(model: type[BaseModel], data: dict) -> dict:
    """Undo `_map_as_pairs` for the fields that are mappings."""
    out = dict(data)
    for key, value in data.items():
        f = model.model_fields.get(key)
        if f is None or not isinstance(value, list) or "dict" not in str(f.annotation):
            continue
        if all(isinstance(p, dict) and set(p) == {"name", "value"} for p in value):
            out[key] = {p["name"]: p["value"] for p in value}
    return out


def _nullable(prop: dict) -> dict:
    if "anyOf" in prop:
        if not any(p.get("type") == "null" for p in prop["anyOf"]):
            prop = {**prop, "anyOf": [*prop["anyOf"], {"type": "null"}]}
        return prop
    if isinstance(prop.get("type"), str):
        if "enum" in prop or "$ref" in prop:
            return {"anyOf": [{k: v for k, v in prop.items() if k != "description"}, {"type": "null"}],
                    **({"description": prop["description"]} if "description" in prop else {})}
        return {**prop, "type": [prop["type"], "null"]}
    if "$ref" in prop:
        rest = {k: v for k, v in prop.items() if k != "$ref"}
        return {"anyOf": [{"$ref": prop["$ref"]}, {"type": "null"}], **rest}
    return prop


# --------------------------------------------------------------------------- truncation

MODEL_OUTPUT_LIMIT = 16_000  # bytes of one stream the model sees; the rest goes to the artifact


def truncate_for_model(text: str, limit: int = MODEL_OUTPUT_LIMIT, artifact: str | None = None) -> str:
    """Head and tail of `text` with byte and line counts; whole text stays in `artifact`.

    Each cut moves to the nearest line break (or space) within a sixteenth of `limit`: the text is
    redacted after it is cut, and a secret a cut went through would leave a piece that no rule can
    tell from other text (a token's end without its prefix, a password without the name before it).
    """
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    # Where a cut may move to, best first: a line break, one escaped in JSON text, a space, a JSON string's end.
    breaks = (b"\n", b"\\n", b" ", b'"')
    reach = limit // 16
    head_end, tail_start = limit * 2 // 3, len(data) - limit // 3
    for brk in breaks:
        at = data.rfind(brk, head_end - reach, head_end)
        if at >= 0:
            head_end = at
            break
    for brk in breaks:
        at = data.find(brk, tail_start, tail_start + reach)
        if at >= 0:
            tail_start = at + len(brk)
            break
    head = data[:head_end].decode("utf-8", "ignore")
    tail = data[tail_start:].decode("utf-8", "ignore")
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    where = f"; whole output in {artifact}" if artifact else ""
    return (
        f"{head}\n[... {omitted} bytes omitted of {len(data)} bytes, {lines} lines in all{where} ...]\n{tail}"
    )


RECORD_FIELD_LIMIT = 64_000  # bytes of one text field a transcript line keeps; the rest goes to an artifact


def has_long_text(data: Any, limit: int = RECORD_FIELD_LIMIT) -> bool:
    """Whether bound_for_record would change anything: a cheap scan, as nearly every result is small."""
    chars = limit // 4  # a UTF-8 character is at most 4 bytes
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > chars:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def bound_for_record(data: Any, ctx: ToolContext, limit: int = RECORD_FIELD_LIMIT, where: str = "",
                     artifact: str | None = None) -> Any:
    """A result's data with every text longer than `limit` cut to its head and tail.

    The transcript holds one JSON line per event, and replay, reports and `agent show` read it
    whole: a command that prints a GiB must not make a GiB line. The whole text is kept as an
    artifact, unless the tool already keeps it and names it in a sibling `<field>_artifact`.
    Bounding bounded data changes nothing (a replay may pass recorded data through again).
    """
    if isinstance(data, str):
        if len(data) <= limit // 4 or len(data.encode("utf-8", "replace")) <= limit:
            return data
        # Redacted before it is cut: a secret the cut went through would leave a piece no rule knows.
        data = ctx.redact(data)
        if artifact is None:  # None too when it could not be saved: the session stops at its next event
            artifact = ctx.artifacts.save(f"{ctx.call_id}-{where.rstrip('.') or 'text'}.txt", data)
        return truncate_for_model(data, limit - 400, artifact=artifact)  # the marker line fits in the rest
    if isinstance(data, dict):
        return {key: bound_for_record(value, ctx, limit, f"{where}{key}.", data.get(f"{key}_artifact"))
                for key, value in data.items()}
    if isinstance(data, list):
        return [bound_for_record(v, ctx, limit, f"{where}{i}.") for i, v in enumerate(data)]
    return data


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- registry


class Registry:
    """The tools of a session, by name."""

    def __init__(self, tools: list[Tool]):
        self._tools = {t.name: t for t in tools}

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self):
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict]:
        return [t.schema() for t in self._tools.values()]
