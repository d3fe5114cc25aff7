"""`agent chat`: an interactive session; the operator approves risky steps at the terminal.

The prompt takes requests for the model and slash commands (/help lists them). What the
session does is drawn by a view from app/ui/: a rich terminal view, or plain lines when
output is not a terminal.

Ctrl-C while the model is answering, or at an approval prompt, stops the request at once
(an approval interrupted this way is a "no"). Ctrl-C while tools run cancels the batch: each
running command kills its process on the host and reports back, then the request stops
before the model is asked again. A second Ctrl-C stops at once. Either way the chat returns
to the prompt; Ctrl-C or Ctrl-D at the prompt leaves, and the transcript is closed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from agent.errors import Signalled, interruption_reason
from agent.goal import HostEntry
from agent.host_specs import host_entry_from_flag
from agent.loop import Outcome, Session
from agent.record.transcript import new_transcript_path
from agent.safety.policy import ApprovalAnswer, ApprovalRequest
from agent.session_builder import build_session, make_model
from app.ui import PlainView, TerminalView, approval_rows, make_view
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


class TerminalApprover:
    """Asks the operator. Destructive steps are asked one by one; mutating ones may be approved for the session.

    Enter, end of input and Ctrl-C all mean no. After a Ctrl-C nothing more of the batch is
    approved: the rest is answered no without asking.
    """

    def __init__(self, inp=None, out=None, record: Callable[[ApprovalRequest, ApprovalAnswer], None] | None = None,
                 view=None, ctrl_c: CtrlC | None = None):

        self.view = view or PlainView(out=out or sys.stderr, inp=inp or sys.stdin)
        self.record = record  # writes the answer to the transcript
        self.ctrl_c = ctrl_c or CtrlC()

    def record_in(self, session: Session) -> None:
        """Every answer goes into the session's transcript, by the operator."""
        self.record = lambda req, answer: session.emit(
            "approval", host=req.host, tool=req.tool, subject=req.subject, answer=answer.value, by="operator")

    def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        answer = ApprovalAnswer.NO if self.ctrl_c.requested else self._prompt(request)
        if self.record:
            self.record(request, answer)
        return answer

    def _prompt(self, r: ApprovalRequest) -> ApprovalAnswer:

        mutating = r.risk.cls is RiskClass.MUTATING
        tone = "warn" if mutating else "danger"
        where = f" on {r.host}" if r.host else ""
        choices = "y = yes, once · n = no" + (
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
                a = line.strip().lower()
                if a in ("y", "yes"):
                    return ApprovalAnswer.YES_ONCE
                if a in ("n", "no", ""):
                    return ApprovalAnswer.NO
                if a in ("s", "session") and mutating:
                    return ApprovalAnswer.YES_SESSION
                self.view.warn("answer y or n" + (", or s" if mutating else ""))
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
    ("/transcript", "where the transcript is being written"),
    ("/quit", "leave (also Ctrl-D, or Ctrl-C at the prompt)"),
]
KEYS = "Ctrl-C cancels a running request · Ctrl-C or Ctrl-D at the prompt leaves"


class Chat:
    def __init__(self, session: Session, view, ctrl_c: CtrlC, transcript: Path | None):
        self.session = session
        self.view = view
        self.ctrl_c = ctrl_c
        self.transcript = transcript
        # Said to the model with the next request (a host the operator added).
        self.pending_notes: list[str] = []

    @property
    def prompt(self) -> str:
        mark = getattr(self.view, "prompt_mark", ">")
        return f"plan {mark} " if self.session.gate.plan else f"{mark} "

    def run(self) -> int:
        self.view.info(f"transcript: {self.transcript or '(not written)'}")
        self.view.info(f"/help for commands · {KEYS}")
        with self.session.closing():
            try:
                while True:
                    try:
                        line = self.view.read_line(self.prompt)
                    except EOFError:
                        self.view.info("")  # end the prompt's line
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
                self.view.info("")
                self.session.ending = Outcome("interrupted", interruption_reason(e) if isinstance(e, Signalled)
                                              else "the operator pressed Ctrl-C at the prompt")
            else:
                self.session.ending = Outcome("done", "the operator left")
        self.view.info(f"transcript: {self.transcript or '(not written)'}")
        return 0

    def send(self, text: str) -> Outcome | None:
        if self.pending_notes:
            text = "\n".join(self.pending_notes) + "\n\n" + text
            self.pending_notes = []
        outcome = None
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
                    "/backups": self.backups, "/plan": self.plan, "/transcript": self.where}
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
            self.view.card(f"unknown host key for {name}", [
                ("host", e.host), ("key", f"{e.key_type} {e.fingerprint}"),
                ("check", "compare with the host's owner: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub (on the host)"),
            ], tone="warn")
            try:
                answer = self.view.read_line("trust this key? [y/N] ").strip().lower()
            except EOFError:
                answer = ""
            if answer not in ("y", "yes"):
                self.view.info(f"not trusted; commands on {name} fail until its key is trusted (/host trust {name})")
                return
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

    def where(self, args: list[str]) -> None:
        if self.transcript is None:
            self.view.info("this session is not written to a transcript")
            return
        artifacts = self.session.transcript.artifacts_dir
        self.view.info(f"transcript: {self.transcript}\nartifacts:  {artifacts}")


def run_chat(args) -> int:

    # `--plain` forces plain lines; without the flag they are chosen when output is not a terminal.
    view = make_view(plain=getattr(args, "plain", False), use_readline_markers=_line_editing())
    entries: list[HostEntry] = [host_entry_from_flag(h, args.trust_host_key) for h in args.host]
    ctrl_c = CtrlC()
    model = StopsOnCtrlC(make_model(args.model, args.base_url, args.model_timeout), ctrl_c)
    path = Path(args.transcript) if args.transcript else new_transcript_path("chat")
    approver = TerminalApprover(view=view, ctrl_c=ctrl_c)
    built = build_session(hosts=entries, model=model, mode="interactive", approver=approver, plan=args.plan,
                          transcript=path, listeners=[view], start_info={"command": "chat"})
    session = built.session
    ctrl_c.session = session
    if isinstance(view, TerminalView):
        view.cancelling = lambda: session.batches.cancel.is_set()  # the current request's flag
    approver.record_in(session)
    return Chat(session, view, ctrl_c, path).run()


def _line_editing() -> bool:
    """Line editing and history at the prompt (GNU readline), when a person types at a terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        import readline  # noqa: F401 - importing it is what gives input() editing and history
    except ImportError:
        return False
    return True
