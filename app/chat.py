"""`agent chat`: an interactive session; the operator approves risky steps at the terminal.

The prompt takes requests for the model and slash commands (/help lists them). What the
session does is drawn by a view from app/ui/: a rich terminal view, or plain lines when
output is not a terminal.

Ctrl-C while the model is answering, or at an approval prompt, stops the request at once
(an approval interrupted this way is a "no"). Ctrl-C while tools run cancels the batch: each
running command kills its process on the host and reports back, then the request stops
before the model is asked again. A second Ctrl-C stops at once. Either way the chat returns
to the prompt; Ctrl-C or Ctrl-D at the prompt (or /exit) leaves: the transcript is closed, the
report is written beside it, and the tokens used (and their cost, where a price is known) are shown.

Before the first prompt, every SSH host is reached: an unknown host key is shown (its type and
whole fingerprint) and trusted only on the operator's yes. A simulated host says what it builds
while it does. At an approval, "n: ..." (or "no, because ...") declines and gives the model the
operator's words with the refusal; /model NAME switches the model for the next requests; retries
of the model server (a rate limit, a 5xx) are shown with their reason and wait as they happen.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Union

from agent.errors import RecordWriteError, SessionConfigError, Signalled, interruption_reason
from agent.finish import finish, write_end_report
from agent.goal import HostEntry
from agent.host_specs import host_entry_from_flag
from agent.loop import Outcome, Session
from agent.model import ModelError
from agent.model.openai_client import OpenAIModel
from agent.preflight import reach_hosts
from agent.record.transcript import new_transcript_path
from agent.safety.policy import ApprovalAnswer, ApprovalRequest, Declined
from agent.session_builder import DEFAULT_MODEL, build_session
from agent.text import clip
from app.exit_codes import ExitCode
from app.ui import PlainView, TerminalView, approval_rows, make_view
from app.ui.usage import Price, UsageTotals, configured_price, list_price
from tools.base import RiskClass
from tools.hosts import HostError, HostSpec, UnknownHostKeyError


class CtrlC:
    """What Ctrl-C means while a request is worked on; installed only around `Session.send`.

    Waiting for the model, or for the operator's answer at a prompt, Ctrl-C raises
    KeyboardInterrupt there and then: nothing is half-written at those points. Anywhere else
    (tools running, events being recorded) it cancels the request's running calls: each
    running command kills its process on the host and its result is recorded, and the model
    wrapper below stops the request before the next turn. A second Ctrl-C raises at once.

    The handler runs between two bytecodes of the main thread, which may hold any lock at
    that moment (an Event's own, while it sets one): so it only sets a plain attribute and
    writes a byte to a pipe, and a relay thread does the cancelling, which takes locks.
    """

    def __init__(self, session: Session | None = None):
        self.session = session
        self.requested = False  # a Ctrl-C came during this request
        self.phase = "other"  # "model" | "asking" | "other"
        self._presses: collections.deque = collections.deque()  # the flags each press cancels
        self._wake_w: int | None = None  # the relay's pipe, made when first armed

    def handle(self, signum=None, frame=None) -> None:
        again = self.requested
        self.requested = True
        if self.session is not None and self._wake_w is not None:
            self._presses.append(self.session.batches.flags)  # this request's flags, not the next one's
            os.write(self._wake_w, b"!")
        if again or self.phase in ("model", "asking"):
            raise KeyboardInterrupt

    def _relay(self, wake_r: int) -> None:
        while os.read(wake_r, 1):
            while self._presses:
                self._presses.popleft().by_operator()

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        main = threading.current_thread() is threading.main_thread()
        if main and self._wake_w is None:
            wake_r, self._wake_w = os.pipe()
            threading.Thread(target=self._relay, args=(wake_r,), name="ctrl-c-relay", daemon=True).start()
        previous = signal.signal(signal.SIGINT, self.handle) if main else None
        try:
            yield
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
            self.requested = False

    @contextlib.contextmanager
    def during(self, phase: str) -> Iterator[None]:
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before


class StopsOnCtrlC:
    """The session's model, asked only while no Ctrl-C is pending, and interruptible while it answers."""

    def __init__(self, model: Any, ctrl_c: CtrlC):
        self.model = model
        self.ctrl_c = ctrl_c
        self.name = getattr(model, "name", "?")

    def complete(self, messages, tools, on_text=None):
        if self.ctrl_c.requested:
            raise KeyboardInterrupt
        with self.ctrl_c.during("model"):
            return self.model.complete(messages, tools, on_text=on_text)

    def use(self, model: Any) -> None:
        """Another model for the next requests (/model NAME)."""
        self.model = model
        self.name = getattr(model, "name", "?")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


Reply = Union[ApprovalAnswer, Declined]

# "no, because ...", "n: do X instead", "No - wrong host": a no, and the words after it.
_NO_AND_WORDS = re.compile(r"(?is)(?:no|n)(?:\s*[,:;.!\u2013\u2014-]+\s*|\s+)(?P<words>\S.*)")


def read_approval(line: str, mutating: bool) -> Reply | None:
    """What the operator answered at an approval prompt; None when it is none of the answers."""
    text = line.strip()
    word = text.lower().rstrip(".!")
    if word in ("y", "yes"):
        return ApprovalAnswer.YES_ONCE
    if word in ("n", "no", ""):
        return ApprovalAnswer.NO
    if word in ("s", "session") and mutating:
        return ApprovalAnswer.YES_SESSION
    said = _NO_AND_WORDS.fullmatch(text)
    if said:
        return Declined(" ".join(said.group("words").split()))
    return None


def answer_of(reply: Reply) -> ApprovalAnswer:
    return reply.answer if isinstance(reply, Declined) else reply


class TerminalApprover:
    """Asks the operator. Destructive steps are asked one by one; mutating ones may be approved for the session.

    Enter, end of input and Ctrl-C all mean no; "n: ..." is a no with words for the model. After a
    Ctrl-C nothing more of the batch is approved: the rest is answered no without asking.
    """

    def __init__(self, inp=None, out=None, record: Callable[[ApprovalRequest, Reply], None] | None = None,
                 view=None, ctrl_c: CtrlC | None = None):

        self.view = view or PlainView(out=out or sys.stderr, inp=inp or sys.stdin)
        self.record = record  # writes the answer to the transcript
        self.ctrl_c = ctrl_c or CtrlC()

    def record_in(self, session: Session) -> None:
        """Every answer goes into the session's transcript, by the operator, with their words if they gave any."""
        def record(req: ApprovalRequest, reply: Reply) -> None:
            words = {"reason": reply.reason} if isinstance(reply, Declined) else {}
            if req.undo is not None:  # what the operator was told would undo the step
                words |= {"undone_by": req.undo.backup.backup_id if req.undo.backup else None, "undo": req.undo.says}
            session.emit("approval", host=req.host, tool=req.tool, subject=req.subject,
                         answer=answer_of(reply).value, by="operator", **words)

        self.record = record

    def ask(self, request: ApprovalRequest) -> Reply:
        reply = ApprovalAnswer.NO if self.ctrl_c.requested else self._prompt(request)
        if self.record:
            self.record(request, reply)
        return reply

    def _prompt(self, r: ApprovalRequest) -> Reply:

        mutating = r.risk.cls is RiskClass.MUTATING
        tone = "warn" if mutating else "danger"
        where = f" on {r.host}" if r.host else ""
        choices = "y = yes, once · n = no (\"n: ...\" tells the model why, or what to do instead)" + (
            " · s = yes to this exact command on this host for this session" if mutating
            else " (a destructive step is asked one by one)")
        with self.view.paused():
            self.view.card(f"approval needed: {r.risk.cls.value} step{where}", approval_rows(r), tone)
            self.view.info(choices)
            while not self.ctrl_c.requested:  # a Ctrl-C while the card was drawn is a no, too
                try:
                    with self.ctrl_c.during("asking"):
                        line = self.view.read_line("approve? [y/n" + ("/s" if mutating else "") + "] ")
                except Signalled:
                    raise  # SIGTERM or SIGHUP ends the chat; only Ctrl-C means "no"
                except (EOFError, KeyboardInterrupt):
                    return ApprovalAnswer.NO
                reply = read_approval(line, mutating)
                if reply is not None:
                    return reply
                self.view.warn("answer y or n" + (", or s" if mutating else "") + "; or n: and why")
        return ApprovalAnswer.NO


# --------------------------------------------------------------------------- the chat

COMMANDS = [
    ("/help", "this list"),
    ("/tools", "the tools the model can call"),
    ("/hosts", "the session's hosts, and their latest backup"),
    ("/host add NAME [user@host[:port]]", "put a host in scope (ssh; NAME alone: an ~/.ssh/config alias, or local)"),
    ("/host trust NAME", "connect to NAME and decide on an unknown host key"),
    ("/backups", "verified backups taken in this session"),
    ("/plan", "toggle dry run: changes are shown as 'would run' and not executed"),
    ("/model [NAME]", "the model answering; with NAME, switch to it (same server) for the next requests"),
    ("/transcript", "where the transcript is being written"),
    ("/quit, /exit", "leave: the report is written beside the transcript, the tokens used are shown "
                     "(also Ctrl-D, or Ctrl-C at the prompt)"),
]
KEYS = "Ctrl-C cancels a running request · Ctrl-C or Ctrl-D at the prompt leaves"


class Chat:
    def __init__(self, session: Session, view, ctrl_c: CtrlC, transcript: Path | None,
                 models: "ChatModels | None" = None, before_prompt: Callable[["Chat"], None] | None = None):
        self.session = session
        self.view = view
        self.ctrl_c = ctrl_c
        self.transcript = transcript
        self.models = models
        self.before_prompt = before_prompt
        # Said to the model with the next request (a host the operator added; where a resumed session stands).
        self.pending_notes: list[str] = []
        # Tokens per model, from each answer as the loop records it (the model answering at that time).
        self.usage = UsageTotals()
        session.listeners.append(self._count_usage)

    def _count_usage(self, ev: dict) -> None:
        if ev.get("type") == "model_response":
            self.usage.add(getattr(self.session.model, "name", "?"), ev.get("usage"))

    @property
    def prompt(self) -> str:
        mark = getattr(self.view, "prompt_mark", ">")
        return f"plan {mark} " if self.session.gate.plan else f"{mark} "

    def run(self) -> int:
        self.view.info(f"transcript: {self.transcript or '(not written)'}")
        self.view.info(f"/help for commands · {KEYS}")
        with self.session.closing():
            try:
                self.reach_ssh_hosts()
                if self.before_prompt is not None:
                    self.before_prompt(self)
                while True:
                    try:
                        line = self.view.read_line(self.prompt)
                    except EOFError:  # Ctrl-D (the view has ended the prompt's line)
                        break
                    text = line.strip()
                    if not text:
                        continue
                    if text.startswith("/") and "/" not in text.split()[0][1:]:  # "/usr/local/cuda ..." is a request
                        if not self.command(text):
                            break
                        continue
                    self.send(text)
            except KeyboardInterrupt as e:
                ending = Outcome("interrupted", interruption_reason(e) if isinstance(e, Signalled)
                                 else "the operator pressed Ctrl-C at the prompt")
            else:
                ending = Outcome("done", "the operator left")
            self.read_end(ending)
        return self.leave()

    def read_end(self, ending: Outcome) -> None:
        """However the operator leaves, what the changed hosts show now is read and recorded
        (agent/finish.py), so the report says what the host shows, not what the steps suggest."""
        if self.session.changed_hosts & set(self.session.gate.scope):
            self.view.info("reading the final state of the changed hosts… (Ctrl-C skips it)")
        finish(self.session, ending)

    def leave(self) -> int:
        """After the session's end is written: where its record and report are, and what it used."""
        code = ExitCode.OK
        self.view.info(f"transcript: {self.transcript or '(not written)'}")
        if self.transcript is not None:
            try:
                self.view.info(f"report:     {write_end_report(self.transcript)[1]}")
            except RecordWriteError as e:  # the transcript is whole; only its report could not be written
                self.view.warn(str(e))
                code = ExitCode.RECORD
        for line in self.usage.lines(self.price_of, self.models.server if self.models else None):
            self.view.info(line)
        return code

    def price_of(self, model: str) -> Price | None:
        if self.models is None:
            return None
        return self.models.price or list_price(model, self.models.server)

    def reach_ssh_hosts(self) -> None:
        """Before the first prompt: connect to every SSH host, so that an unknown key is decided on now
        rather than found by the model's first call, and an unreachable host is said at once."""
        pool = self.session.hosts
        if pool is None:
            return
        names = [n for n in sorted(self.session.gate.scope) if getattr(pool.spec(n), "transport", None) == "ssh"]
        if not names:
            return
        self.view.info(f"connecting to {', '.join(names)}…")
        problems = {u.host: u.problem for u in reach_hosts(pool, names)}
        for name in names:
            problem = problems.get(name)
            if problem is None:
                self.view.info(f"{name}: connected")
            elif problem.startswith(f"{name}: unknown host key "):
                self.check_host(name)  # connects again: the key, shown, is trusted on a yes
            else:
                self.view.warn(problem)

    def send(self, text: str) -> Outcome | None:
        if self.pending_notes:
            text = "\n".join(self.pending_notes) + "\n\n" + text
            self.pending_notes = []
        outcome = None
        before = self.usage.tokens()
        try:
            with self.ctrl_c.armed(), self.view.busy():
                outcome = self.session.send(text)
        except Signalled:
            raise  # a termination signal ends the chat (the caller closes the session); Ctrl-C cancels the turn
        except KeyboardInterrupt:
            pass
        finally:
            self.session.batches.rearm_cancel()
        if outcome is None:
            self.view.warn("cancelled; back at the prompt")
        elif outcome.status not in ("done", "model_error"):  # the view showed a model error already
            self.view.warn(f"stopped ({outcome.status}): {outcome.reason}")
        if self.usage.tokens() != before:  # what the request cost, on screen as it ends
            self.view.info(self.usage.since(before))
        return outcome

    # ------------------------------------------------------------------ slash commands

    def command(self, text: str) -> bool:
        """Run one slash command; False means leave."""
        try:
            words = shlex.split(text)
        except ValueError as e:
            self.view.warn(f"cannot read that command: {e}")
            return True
        name, args = words[0].lower(), words[1:]
        if name in ("/quit", "/exit", "/q"):
            return False
        handlers = {"/help": self.help, "/tools": self.tools, "/hosts": self.hosts, "/host": self.host,
                    "/backups": self.backups, "/plan": self.plan, "/model": self.model, "/transcript": self.where}
        handler = handlers.get(name)
        if handler is None:
            self.view.warn(f"unknown command {name}; /help lists them")
            return True
        try:
            handler(args)
        except Signalled:
            raise
        except KeyboardInterrupt:
            self.view.warn("cancelled")
        return True

    def help(self, args: list[str]) -> None:
        self.view.table("commands", ["command", "what it does"], [list(c) for c in COMMANDS])
        self.view.info(KEYS)

    def tools(self, args: list[str]) -> None:
        rows = [[t.name, t.description().splitlines()[0]] for t in self.session.registry]
        self.view.table("tools", ["tool", "what it does"], rows)

    def hosts(self, args: list[str]) -> None:
        pool = self.session.hosts
        rows = []
        for name in sorted(self.session.gate.scope):
            spec = pool.spec(name) if pool is not None else None
            backup = self.session.gate.ledger.latest_verified(name)
            rows.append([name, spec.transport if spec else "?", (spec.target or name) if spec else "-",
                         backup.backup_id if backup else "none"])
        if rows:
            self.view.table("hosts", ["host", "transport", "target", "latest backup"], rows)
        else:
            self.view.info("no hosts yet: /host add NAME [user@host[:port]]")

    def host(self, args: list[str]) -> None:
        usage = "usage: /host add NAME [user@host[:port]]  ·  /host trust NAME"
        if len(args) >= 2 and args[0] == "add" and len(args) <= 3:
            self.add_host(args[1], args[2] if len(args) == 3 else None)
        elif len(args) == 2 and args[0] == "trust":
            if args[1] not in self.session.gate.scope:
                self.view.warn(f"{args[1]} is not one of this session's hosts; /hosts lists them")
            else:
                self.check_host(args[1])
        else:
            self.view.warn(usage)

    def add_host(self, name: str, target: str | None) -> None:
        from agent.goal import host_name_problem  # lazy: per command

        problem = host_name_problem(name)
        if problem:
            self.view.warn(problem.replace("`target:`", "the second word: /host add NAME user@host[:port]"))
            return
        if name in self.session.gate.scope:
            self.view.warn(f"{name} is already one of this session's hosts")
            return
        if self.session.hosts is None:
            self.view.warn("this session has no host pool to add to")
            return
        if name == "local" and target is None:
            spec = HostSpec(name="local", transport="local")
        else:
            spec = HostSpec(name=name, transport="ssh", target=target or name)
        self.session.hosts.add(spec)
        # The operator's word puts a host in scope; the record says who and when.
        self.session.gate.scope.add(name)
        self.session.emit("note", kind="host_added", host=name, transport=spec.transport, target=spec.target,
                          by="operator")
        self.pending_notes.append(f"(The operator added host {name!r} to this session; it can be used now.)")
        self.view.info(f"{name} added ({spec.transport}{' ' + spec.target if spec.target else ''}); checking it…")
        self.check_host(name)

    def check_host(self, name: str) -> None:
        """Connect and run `true`; an unknown host key is shown and trusted only on the operator's yes."""

        try:
            result = self.session.hosts.get(name).run("true", timeout=30)
        except UnknownHostKeyError as e:
            if self.ask_to_trust(name, e):
                self.session.hosts.trust_host_key(name, e.fingerprint)
                # The next connection accepts exactly this key, saves it, and records host_key_trusted.
                self.check_host(name)
            return
        except HostError as e:
            self.view.warn(str(e))
            return
        if result.ok:
            self.view.info(f"{name}: connected")
        else:
            self.view.warn(f"{name}: `true` exited {result.exit_code}: {(result.stderr or '').strip()[-300:]}")

    def ask_to_trust(self, name: str, e: UnknownHostKeyError) -> bool:
        """The key's type and whole fingerprint, and the operator's yes or no; Enter, Ctrl-D and Ctrl-C are no."""
        self.view.card(f"unknown host key for {name}", [
            ("host", e.host), ("key type", e.key_type), ("fingerprint", e.fingerprint),
            ("check", f"compare it with the host's owner (on the host: ssh-keygen -lf "
                      f"/etc/ssh/ssh_host_{_key_file(e.key_type)}_key.pub)"),
        ], tone="warn")
        while True:
            try:
                answer = self.view.read_line("trust this key? [y/N] ").strip().lower()
            except Signalled:
                raise
            except (EOFError, KeyboardInterrupt):
                answer = "n"
            if answer in ("y", "yes"):
                return True
            if answer in ("", "n", "no"):
                self.view.info(f"not trusted: commands on {name} fail until its key is trusted; to trust it later: "
                               f"/host trust {name} (or start chat with --trust-host-key {e.fingerprint})")
                return False
            self.view.warn("answer y or n")

    def backups(self, args: list[str]) -> None:
        records = self.session.gate.ledger.all()
        if not records:
            self.view.info("no verified backup in this session yet; every change needs one of its host first")
            return
        rows = [[b.backup_id, b.host, b.kind, str(b.package_count if b.package_count is not None else "-"),
                 time.strftime("%H:%M:%S", time.localtime(b.created_at)), b.remote_dir] for b in records]
        self.view.table("backups", ["backup", "host", "kind", "packages", "taken", "where"], rows)

    def plan(self, args: list[str]) -> None:
        gate = self.session.gate
        gate.plan = not gate.plan
        self.session.emit("note", kind="plan", plan=gate.plan, by="operator")
        if gate.plan:
            self.view.info("dry run on: read-only steps run; anything that changes a host is shown as "
                           "'would run' and not executed")
        else:
            self.view.info("dry run off: changes run again, each after a backup and your approval")

    def model(self, args: list[str]) -> None:
        answering = self.session.model
        current = getattr(answering, "name", "?")
        where = f" at {self.models.server}" if self.models is not None and self.models.server else ""
        if not args:
            self.view.info(f"model: {current}{where} · /model NAME switches to another for the next requests")
            return
        if len(args) != 1 or not isinstance(answering, StopsOnCtrlC) or self.models is None:
            self.view.warn("usage: /model NAME (one name, as the server knows it: /model alone shows the current one)")
            return
        name = args[0]
        if name == current:
            self.view.info(f"model: {current} already")
            return
        answering.use(self.models.make(name))
        # The operator's word changes who answers; the record says who and when.
        self.session.emit("note", kind="model", model=name, previous=current, by="operator")
        self.view.info(f"model: {name}{where} from the next request on (was {current}: /model {current} "
                       "switches back)")

    def where(self, args: list[str]) -> None:
        if self.transcript is None:
            self.view.info("this session is not written to a transcript")
            return
        artifacts = self.session.transcript.artifacts_dir
        self.view.info(f"transcript: {self.transcript}\nartifacts:  {artifacts}")


class ChatModels:
    """How this chat makes its model: one server, one timeout, retries shown as they happen; /model NAME
    makes another on the same server."""

    def __init__(self, base_url: str | None, timeout_s: float, on_retry: Callable[[int, BaseException, float], None],
                 price: Price | None):
        self.base_url = base_url  # as given: None is OPENAI_BASE_URL, else OpenAI's
        self.timeout_s = timeout_s
        self.on_retry = on_retry
        self.price = price  # configured (UPGRADE_AGENT_PRICE): it wins over a list price
        self.server: str | None = None  # the server the first model resolved to

    def make(self, name: str | None) -> OpenAIModel:
        name = name or os.environ.get("UPGRADE_AGENT_MODEL") or DEFAULT_MODEL
        try:
            model = OpenAIModel(name, base_url=self.base_url, timeout_s=self.timeout_s, on_retry=self.on_retry)
        except ModelError as e:
            raise SessionConfigError(str(e)) from None
        self.server = model.base_url
        return model


class RetryNotes:
    """The model client's `on_retry`: each retry of a request goes on the record and the screen as its wait
    starts (the reason and how long), instead of a silent pause."""

    def __init__(self, ctrl_c: CtrlC):
        self.ctrl_c = ctrl_c
        self.session: Session | None = None

    def __call__(self, attempt: int, error: BaseException, wait_s: float) -> None:
        if self.session is None:
            return
        text = f"model server {retry_reason(error)}: trying again in {_wait(wait_s)} (try {attempt + 1})"
        # Called while the model is asked, where a Ctrl-C raises at once: the note is written outside
        # that phase, so no Ctrl-C cuts an event in half; one pressed meanwhile stops the request here.
        with self.ctrl_c.during("other"):
            self.session.emit("note", kind="model_retry", attempt=attempt, wait_s=round(wait_s, 3), text=text)
        if self.ctrl_c.requested:
            raise KeyboardInterrupt


_STATUS_WORDS = {408: "request timeout", 409: "conflict", 429: "rate limit", 500: "internal error",
                 502: "bad gateway", 503: "unavailable", 504: "gateway timeout"}


def retry_reason(error: BaseException) -> str:
    """Why a request is tried again, in a few words: '429 (rate limit: slow down)', 'could not be reached'."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        words = _STATUS_WORDS.get(status, "server error" if status >= 500 else "error")
        said = _server_said(error)
        return f"answered {status} ({words}{': ' + said if said else ''})"
    if "timeout" in type(error).__name__.lower():
        return "did not answer in time"
    cause = error.__cause__ or error
    first = next((line.strip() for line in str(cause).splitlines() if line.strip()), type(cause).__name__)
    return f"could not be reached ({clip(first, 120)})"


def _server_said(error: BaseException) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        said = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(said, str):
            return clip(" ".join(said.split()), 120)
    return ""


def _wait(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"


def _key_file(key_type: str) -> str:
    """The host key file's middle part for a key type (ssh-ed25519 -> ed25519, ecdsa-sha2-nistp256 -> ecdsa)."""
    return next((short for short in ("ed25519", "ecdsa", "rsa", "dsa") if short in key_type), "*")


def sim_building(names: list[str]) -> tuple[str, str]:
    """What the chat says while simulated hosts are built, and once they are."""
    from tools.sim.build import base_python, cache_home, source_digest  # lazy: only a sim host needs it

    cache = cache_home() / f"sim-{source_digest(base_python())}"
    hosts = ", ".join(names)
    if (cache / "ready").exists():
        what = f"building simulated host {hosts} from its cache in {cache}…"
    else:
        what = (f"building simulated host {hosts}: first its package wheels, indexes and a Python venv with torch "
                f"(this once: they are cached in {cache} for next time)…")
    return what, f"simulated host {hosts} ready"


def run_chat(args) -> int:
    entries: list[HostEntry] = [host_entry_from_flag(h, args.trust_host_key) for h in args.host]
    return start_chat(args, entries, {"command": "chat"})


def start_chat(args, entries: list[HostEntry], start_info: dict, sims: dict | None = None,
               before_prompt: Callable[["Chat"], None] | None = None) -> int:
    """A chat on these hosts until the operator leaves; `before_prompt` runs once the hosts are reached
    (agent resume: the stopped session's state, checked again, and the operator's word on its approvals)."""
    try:
        price = configured_price()
    except ValueError as e:
        raise SessionConfigError(str(e)) from None
    # `--plain` forces plain lines; without the flag they are chosen when output is not a terminal.
    view = make_view(plain=getattr(args, "plain", False), use_readline_markers=_line_editing(),
                     verbosity=getattr(args, "verbosity", None))
    ctrl_c = CtrlC()
    retries = RetryNotes(ctrl_c)
    models = ChatModels(args.base_url, args.model_timeout, retries, price)
    model = StopsOnCtrlC(models.make(args.model), ctrl_c)
    path = Path(args.transcript) if args.transcript else new_transcript_path("chat")
    approver = TerminalApprover(view=view, ctrl_c=ctrl_c)
    fresh = [e.name for e in entries if e.transport == "sim" and e.name not in (sims or {})]
    # A simulated host takes seconds to build (the first one much longer): say so rather than show nothing.
    building = view.working(*sim_building(fresh)) if fresh else contextlib.nullcontext()
    with building:
        built = build_session(hosts=entries, model=model, mode="interactive", approver=approver,
                              plan=getattr(args, "plan", False), transcript=path, listeners=[view],
                              start_info=start_info, sims=sims)
    session = built.session
    ctrl_c.session = retries.session = session
    if isinstance(view, TerminalView):
        view.cancelling = lambda: session.batches.cancel.is_set()  # the current request's flag
    approver.record_in(session)
    return Chat(session, view, ctrl_c, path, models, before_prompt).run()


def _line_editing() -> bool:
    """Line editing and history at the prompt (GNU readline), when a person types at a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        import readline  # noqa: F401 - importing it is what gives input() editing and history
    except ImportError:
        return False
    return True
