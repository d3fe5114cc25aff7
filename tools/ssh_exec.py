"""ssh_exec: run one shell command on one host of the session."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools.base import (
    MODEL_OUTPUT_LIMIT,
    Action,
    StrictArgs,
    Tool,
    ToolContext,
    ToolError,
    run_live,
    truncate_for_model,
)
from tools.hosts import CommandText, EnvVars, HostError, command_subject


class SSHExecArgs(StrictArgs):
    host: str = Field(description="Name of the host to run on, exactly as the session lists it.")
    command: CommandText = Field(description="The shell command (bash syntax). Runs as the host's login user, "
                                     "in a non-interactive bash with no profile scripts.")
    timeout: float = Field(600, gt=0, le=86_400,
                           description="Wall-clock seconds before the command and everything it started is killed; default 600.")
    cwd: str | None = Field(None, description="Directory to run in (default: the user's home directory).")
    env: EnvVars | None = Field(None, description="Extra environment variables for this command only.")
    outside_sandbox: bool = Field(False, description="Run it outside the read sandbox. Only for a command the "
                                  "sandbox stopped (its hint says so) and that truly needs to: a read (as the gate "
                                  "judges it) then needs the operator's approval or a goal-file rule naming its exact "
                                  "text, and no backup; any other command is a change, with a verified backup too.")



class SSHExecResult(BaseModel):
    host: str
    exit_code: int | None  # None: it never finished (timed out, connection lost, cancelled)
    stdout: str  # the whole text; render() truncates what the model reads
    stderr: str
    duration_s: float
    timed_out: bool = False
    connection_lost: bool = False
    cancelled: bool = False
    cancelled_why: str | None = None  # "by the operator", or the session's time budget
    hint: str | None = None
    stdout_artifact: str | None = None  # where the whole stdout is kept, when it is too long to show
    stderr_artifact: str | None = None


class SSHExec(Tool):
    """Run one shell command on a host and get back its exit code, stdout and stderr.

    The command runs in a clean, non-interactive bash (`bash --noprofile --norc -c`)
    with a fixed PATH, as the host's login user; no terminal, no stdin. Where a step needs
    root, use `sudo -n`: sudo never gets a password, and a sudo that wants one fails (the
    result's `hint` says so). A command under sudo is never read-only, so leave sudo out of reads.

    Every command is checked by the safety gate first. Read-only commands run at once, with
    no backup or approval, inside the host's read sandbox: every file system is read-only there
    (but $TMPDIR), only harmless devices and the GPU's are visible, the command has no privileges
    and reaches no host but the loopback ports it names. A read the sandbox stops fails with a
    hint that says what it blocked; a command that needs what it blocked (a privilege, a device,
    a daemon) can be sent again with outside_sandbox: true, where it needs an approval (a change
    needs a backup too). Read-only commands
    are programs that only print or query, with options that change nothing (nvidia-smi queries, ls, cat/head/grep of ordinary files, ps, ss, ip ... show,
    df, uname, dpkg -l, pip list/show/freeze, `python3 -c` one-liners that only import
    packages and print their versions and devices, `curl -s` GETs of a loopback server's
    health or metrics, `timeout N` around any of these), joined by `|`, `&&`, `||` and `;`.
    Not read-only: writes and redirections into files, wrappers (sudo, env, bash -c), loops,
    `$VAR` except in echo, `$(...)` except one-word outputs such as `$(uname -r)`, and
    programs or options the gate does not know. Those change the host: they need a backup of
    that host and the operator's approval (or a goal file rule), bound to the exact command
    text (and its env). A refused command runs not at all, none of its parts: the refusal
    names the part that made it a change, so send the read-only parts again as a command of
    their own. Prefer one plain command per call over long chains.

    `timeout` (seconds, default 600) kills the command and everything it started when it
    runs too long: the result has timed_out=true and no exit code. If the connection drops
    while a command runs, the result has connection_lost=true: the command was NOT run
    again and may or may not have completed; check its effects before repeating it.

    Long output is cut to its head and tail for you, with the byte and line counts; the
    whole output is kept in the artifact file named in the text. Filter on the host
    (grep, tail, head) when you need a specific part.
    """

    name = "ssh_exec"
    Args = SSHExecArgs
    Result = SSHExecResult

    def action(self, args: SSHExecArgs) -> Action:
        return Action(host=args.host, subject=command_subject(args.command, args.env, args.cwd),
                      risk=None, outside_sandbox=args.outside_sandbox)

    def run(self, ctx: ToolContext, args: SSHExecArgs) -> SSHExecResult:
        try:
            host = ctx.hosts.get(args.host)
            r = run_live(ctx, host, args.command, timeout=args.timeout, cwd=args.cwd, env=args.env,
                         cancel=ctx.cancel)
        except HostError as e:
            raise ToolError(str(e)) from None
        return SSHExecResult(
            host=args.host,
            exit_code=r.exit_code,
            stdout=r.stdout,
            stderr=r.stderr,
            duration_s=round(r.duration_s, 3),
            timed_out=r.timed_out,
            connection_lost=r.connection_lost,
            cancelled=r.cancelled,
            cancelled_why=ctx.cancel_reason() if r.cancelled else None,
            hint=r.hint,
            stdout_artifact=_save_if_long(ctx, "stdout", r.stdout),
            stderr_artifact=_save_if_long(ctx, "stderr", r.stderr),
        )

    def render(self, result: SSHExecResult) -> str:
        if result.timed_out:
            status = "timed out; the command and its children were killed"
        elif result.cancelled:
            status = f"cancelled {result.cancelled_why or 'by the operator'}; the command and its children were killed"
        elif result.connection_lost:
            status = "connection lost while running; the command was not run again"
        else:
            status = f"exit code {result.exit_code}"
        parts = [f"{status} (host {result.host}, {result.duration_s:.2f}s)"]
        if result.hint:
            parts.append(f"hint: {result.hint}")
        for stream, text, artifact in (("stdout", result.stdout, result.stdout_artifact),
                                       ("stderr", result.stderr, result.stderr_artifact)):
            if text:
                parts.append(f"--- {stream} ---\n{truncate_for_model(text, artifact=artifact)}")
            else:
                parts.append(f"--- {stream}: empty ---")
        return "\n".join(parts)


def _save_if_long(ctx: ToolContext, stream: str, text: str) -> str | None:
    if len(text.encode("utf-8", "replace")) <= MODEL_OUTPUT_LIMIT:
        return None
    return ctx.artifacts.save(f"{ctx.call_id}-{stream}.txt", ctx.redact(text))
