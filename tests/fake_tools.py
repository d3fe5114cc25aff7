"""Small tools for loop tests: they exercise the loop, the gate and the transcript, not a host."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from tools.base import Action, BackupRecord, Risk, RiskClass, StrictArgs, Tool, ToolContext, truncate_for_model

READ_ONLY = Risk(cls=RiskClass.READ_ONLY, rule="test:read-only", reason="test tool that reads")
MUTATING = Risk(cls=RiskClass.MUTATING, rule="test:mutating", reason="test tool that changes")


class Echo(Tool):
    """Return the text given. Read-only."""

    name = "echo"

    class Args(StrictArgs):
        text: str = Field(description="text to return")
        host: str | None = Field(default=None, description="host it is about")

    class Result(BaseModel):
        text: str

    def action(self, args):
        return Action(host=args.host, subject=f"echo {args.text}", risk=READ_ONLY)

    def run(self, ctx: ToolContext, args):
        ctx.emit("output", {"stream": "stdout", "text": args.text})
        return self.Result(text=args.text)

    def render(self, result):
        return truncate_for_model(result.text)


class Sleep(Tool):
    """Sleep on a host. `change: true` makes it a mutating step that runs alone on its host."""

    name = "sleep"

    class Args(StrictArgs):
        host: str
        seconds: float = Field(ge=0, le=30)
        change: bool = False

    class Result(BaseModel):
        slept: float

    def action(self, args):
        return Action(host=args.host, subject=f"sleep {args.seconds}", risk=MUTATING if args.change else READ_ONLY)

    def run(self, ctx, args):
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            if ctx.cancel.wait(0.01):
                break
        return self.Result(slept=args.seconds)


class Crash(Tool):
    """Always raises."""

    name = "crash"

    class Args(StrictArgs):
        pass

    class Result(BaseModel):
        pass

    def action(self, args):
        return Action(host=None, subject="crash", risk=READ_ONLY)

    def run(self, ctx, args):
        raise RuntimeError("boom inside the tool")


class FakeBackup(Tool):
    """Take a (pretend) verified backup of a host."""

    name = "fake_backup"

    class Args(StrictArgs):
        host: str

    class Result(BaseModel):
        backup: BackupRecord

    def action(self, args):
        return Action(host=args.host, subject=f"backup {args.host}",
                      risk=Risk(cls=RiskClass.MUTATING, rule="backup", reason="writes a backup directory"))

    def run(self, ctx, args):
        return self.Result(backup=BackupRecord(backup_id=f"bk-{args.host}", host=args.host, kind="test",
                                               target="python", created_at=time.time(), remote_dir="/tmp/bk",
                                               verified=True, package_count=3))


class Change(Tool):
    """A mutating step described by a command."""

    name = "change"

    class Args(StrictArgs):
        host: str
        what: str

    class Result(BaseModel):
        done: str

    def action(self, args):
        return Action(host=args.host, subject=args.what, risk=MUTATING, args={"what": args.what})

    def run(self, ctx, args):
        return self.Result(done=args.what)


def all_fake_tools():
    return [Echo(), Sleep(), Crash(), FakeBackup(), Change()]
