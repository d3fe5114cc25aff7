"""`agent chat`: an interactive session; the operator approves risky steps at the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.loop import Outcome
from agent.safety import ApprovalAnswer, ApprovalRequest
from agent.transcript import new_transcript_path
from tools.base import RiskClass


class TerminalApprover:
    """Asks the operator. Destructive steps are asked one by one; mutating ones may be approved for the session."""

    def __init__(self, inp=None, out=None, record=None):
        self.inp = inp or sys.stdin
        self.out = out or sys.stderr
        self.record = record  # writes the answer to the transcript

    def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        r = request
        print(f"\nApproval needed on {r.host or '-'} ({r.tool})", file=self.out)
        print(f"  command: {r.subject}", file=self.out)
        if r.risk.decoded:
            print(f"  decoded: {r.risk.decoded}", file=self.out)
        print(f"  class:   {r.risk.cls.value} ({r.risk.reason}) [{r.risk.rule}]", file=self.out)
        print(f"  backup:  {r.backup.backup_id if r.backup else 'none'}", file=self.out)
        options = "[y]es once / [n]o" + (" / [s]ession: yes to this exact command on this host for this session"
                                          if r.risk.cls is RiskClass.MUTATING else "")
        while True:
            print(f"  {options}? ", end="", file=self.out, flush=True)
            line = self.inp.readline()
            if not line:
                answer = ApprovalAnswer.NO
                break
            a = line.strip().lower()
            if a in ("y", "yes"):
                answer = ApprovalAnswer.YES_ONCE
                break
            if a in ("n", "no", ""):
                answer = ApprovalAnswer.NO
                break
            if a in ("s", "session") and r.risk.cls is RiskClass.MUTATING:
                answer = ApprovalAnswer.YES_SESSION
                break
        if self.record:
            self.record(r, answer)
        return answer


def run_chat(args) -> int:
    from agent.goal import HostEntry
    from agent.session_builder import build_session, host_entry_from_flag, make_model
    from agent.ui import PlainPrinter

    entries: list[HostEntry] = [host_entry_from_flag(h, args.trust_host_key) for h in args.host]
    model = make_model(args.model, args.base_url, args.model_timeout)
    path = Path(args.transcript) if args.transcript else new_transcript_path("chat")
    approver = TerminalApprover()
    built = build_session(hosts=entries, model=model, mode="interactive", approver=approver, plan=args.plan,
                          transcript=path, listeners=[PlainPrinter(live=True)], start_info={"command": "chat"})
    session = built.session
    approver.record = lambda req, answer: session.emit(
        "approval", host=req.host, tool=req.tool, subject=req.subject, answer=answer.value, by="operator")
    print(f"transcript: {path}\nType your request; /quit to leave.", file=sys.stderr)
    status, reason = "done", "operator left"
    try:
        while True:
            try:
                text = input("> ")
            except EOFError:
                break
            if text.strip() in ("/quit", "/exit"):
                break
            if not text.strip():
                continue
            try:
                outcome: Outcome = session.send(text)
            except KeyboardInterrupt:
                print("\n(cancelled; back at the prompt)", file=sys.stderr)
                session.cancel.clear()
                continue
            if outcome.final_text:
                print(outcome.final_text)
            if outcome.status not in ("done",):
                print(f"({outcome.status}: {outcome.reason})", file=sys.stderr)
    except KeyboardInterrupt:
        status, reason = "interrupted", "operator pressed Ctrl-C at the prompt"
    except BaseException as e:
        session.close("crashed", f"{type(e).__name__}: {e}")
        raise
    session.close(status, reason)
    return 0
