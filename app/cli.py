"""The `agent` command."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

from agent.errors import RecordWriteError, SessionConfigError, interruption_reason
from app import signals
from app.exit_codes import (CHAT_EXIT_CODES_HELP, CLASSIFY_EXIT_CODES, CLASSIFY_EXIT_CODES_HELP, EXIT_CODES_HELP,
                            ExitCode)
from app.exit_codes import fail as _fail


def cmd_show(args) -> int:
    from app.show import cmd_show  # lazy: per command

    return cmd_show(args)


def cmd_replay(args) -> int:
    from app.show import cmd_replay  # lazy: per command

    return cmd_replay(args)


# --------------------------------------------------------------------------- commands


def cmd_tools(args) -> int:
    from tools import default_tools  # lazy: per command

    tools = default_tools()
    if args.json:
        print(json.dumps([t.schema() for t in tools], indent=2))
        return ExitCode.OK
    for t in tools:
        print(f"{t.name:18} {t.description().splitlines()[0]}")
    return ExitCode.OK


def _context_tokens(args) -> None:
    """`--context-tokens N`: the context every session of this process keeps within (agent/compaction.py)."""
    if getattr(args, "context_tokens", None) is not None:
        from agent import compaction  # lazy: per command

        compaction.configure(args.context_tokens)


def cmd_run(args) -> int:
    from app.run import run_goal  # lazy: each command imports only what it uses (agent --help stays fast)

    _context_tokens(args)
    _verbosity(args)
    return run_goal(args)


def cmd_chat(args) -> int:
    from app.chat import run_chat  # lazy: per command

    _context_tokens(args)
    _verbosity(args)
    return run_chat(args)


def cmd_resume(args) -> int:
    from app.resume import resume  # lazy: per command

    _context_tokens(args)
    _verbosity(args)
    return resume(args)


def cmd_sessions(args) -> int:
    from app.sessions import list_sessions  # lazy: per command

    return list_sessions(args)


def cmd_classify(args) -> int:
    from agent.safety.classifier import classify  # lazy: per command

    def one(command: str) -> dict:
        r = classify(command)
        out = {"command": command, "risk": r.cls.value, "reason": r.reason, "rule": r.rule}
        if r.decoded:
            out["decoded"] = r.decoded
        if r.reaches:
            out["reaches"] = r.reaches  # another host: the gate refuses it as outside the session
        return out

    command = " ".join(args.command).strip()
    if command:
        res = one(command)
        if args.json:
            print(json.dumps(res))
        else:
            print(f"{res['risk']}: {res['reason']} [{res['rule']}]" + (
                f"\n  decoded: {res['decoded']}" if res.get("decoded") else "") + (
                f"\n  reaches: {res['reaches']} (outside the session's hosts)" if res.get("reaches") else ""))
        return CLASSIFY_EXIT_CODES[res["risk"]]
    if sys.stdin.isatty():  # nothing piped in: say what to give rather than wait for a line
        return _fail("no command given: agent classify COMMAND... (e.g. agent classify rm -rf /tmp/x), "
                     "or pipe commands in, one per line")
    code = ExitCode.OK
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line.strip():
            res = one(line)
            print(json.dumps(res), flush=True)
            code = max(code, CLASSIFY_EXIT_CODES[res["risk"]])  # the riskiest command's status
    return code


def cmd_exec(args) -> int:
    from app.exec import exec_one  # lazy: see cmd_run

    return exec_one(args)


def cmd_completion(args) -> int:
    from app.completion import script  # lazy: per command

    print(script(args.shell, build_parser()), end="")
    return ExitCode.OK


def cmd_recipe(args) -> int:
    from app.fleet import make_recipe  # lazy: per command

    return make_recipe(args)


def cmd_fleet(args) -> int:
    from app.fleet import run_fleet  # lazy: per command

    return run_fleet(args)


def cmd_demo(args) -> int:
    from app.demo import demo  # lazy: per command

    _verbosity(args)
    return demo(args)


def _verbosity(args) -> None:
    """--quiet / --verbose: what the views of this process show (the transcript keeps everything)."""
    from app.ui import set_default_verbosity  # lazy: per command

    set_default_verbosity(getattr(args, "verbosity", None) or "normal")


# --------------------------------------------------------------------------- parser


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model endpoint (any OpenAI-compatible server)")
    g.add_argument("--model", help="model name (default: the goal file's, else $UPGRADE_AGENT_MODEL, else gpt-4.1)")
    g.add_argument("--base-url", help="server URL, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL)")
    g.add_argument("--model-timeout", type=float, default=None,
                   help="seconds per model request (default: the settings file's model_timeout, else 120)")


def _add_verbosity_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const="quiet",
                   help="show only each turn's summary, refusals, failures and the verdict")
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const="verbose",
                   help="show every tool's output whole (by default a long one is folded to its first and last "
                        "lines; the transcript's artifacts keep it whole either way)")


def _positive_tokens(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens (e.g. 32000)") from None
    if value < 2_000:
        raise argparse.ArgumentTypeError(f"{value} tokens is too small a context to work in: give at least 2000")
    return value


def _add_context_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-tokens", type=_positive_tokens, metavar="N",
                   help="the model's context in tokens: older turns are folded into a summary before a request "
                        "nears it (default: what the server says, else 128000 for gpt-4o/gpt-4.1-class models, "
                        "else 32000)")


def _add_host_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", action="append", default=[], metavar="HOST",
                   help="a host in scope: user@host[:port], an ~/.ssh/config alias, 'local', or 'sim' "
                        "(a fresh simulated GPU host); repeatable")
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust this SHA256:... host key fingerprint of an unknown host (written to the transcript)")


# What a goal file's `sim:` may set (agent/goal.py SimMachine; the README's table says more).
SIM_FIELDS_HELP = """a simulated host (transport: sim) takes these under sim:, each the seed machine's when left out:
  gpu_model, driver, gpus, toolkits ["12.8", "13.0", "13.1"], free_space_mb {/tmp: 500, ...}, gcc (null: none),
  pypi_reachable, bench_noise, numerics ("drift": its served model answers differently on the CUDA 13 build),
  slurm {jobs, drained_by}, kubernetes {pods, cordoned_by}

"""


def _para(text: str) -> str:
    """A description wrapped as argparse would, for the parsers whose examples keep their own lines."""
    return textwrap.fill(text, width=min(100, shutil.get_terminal_size().columns - 2))


def package_version() -> str:
    """The installed package's version; from a checkout that was never installed, pyproject.toml's."""
    from importlib import metadata  # lazy: only --version reads it

    try:
        return metadata.version("upgrade-agent")
    except metadata.PackageNotFoundError:
        pass
    import tomllib  # lazy: as above

    try:
        project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text("utf-8"))["project"]
    except (OSError, ValueError, KeyError):
        return "unknown"
    return str(project.get("version", "unknown")) if project.get("name") == "upgrade-agent" else "unknown"


class _PrintVersion(argparse.Action):
    """`agent --version`, read only when asked for (argparse's own would read it for every command)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {package_version()}")
        parser.exit(ExitCode.OK)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent",
        description="Upgrade the software stack of GPU machines (CUDA toolkit, PyTorch wheels, kernel packages, "
                    "serving engines) with an LLM that plans, typed tools that act, and a safety layer between "
                    "them. Every step is written to a replayable transcript.",
        epilog="Start with `agent demo`. Model endpoint: OPENAI_API_KEY / OPENAI_BASE_URL, or --base-url.\n\n"
               + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_PrintVersion, help="print the version and exit")
    parser.add_argument("--config", metavar="PATH",
                        help="the settings file (default: $UPGRADE_AGENT_CONFIG, else ~/.config/upgrade-agent/config.toml;"
                             " TOML with the keys model, base_url, model_timeout, context_tokens, hosts and a [price] "
                             "table: the README's \"Settings file\"); every setting there is overridden by its flag")
    sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND")

    p = sub.add_parser("run", help="run a goal file, asking nothing; ends with a report and an exit code",
                       description="Run GOAL.yaml without questions: what its authorizations allow may run, "
                                   "every other risky step is refused.",
                       epilog=SIM_FIELDS_HELP + EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("goal", help="goal file (YAML); see goals/ for examples")
    p.add_argument("--plan", action="store_true",
                   help="dry run: reads run, every change is reported as 'would run' or why it would be refused, and "
                        "no benchmark runs; with no model configured (no --model, model:, OPENAI_BASE_URL or "
                        "UPGRADE_AGENT_MODEL), the calls are the ones the authorizations spell out")
    p.add_argument("--json", action="store_true", help="print one JSON event per line instead of progress")
    p.add_argument("--transcript", help="where to write the transcript (default: a new file in the data dir)")
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust an unknown SSH host key with this SHA256:... fingerprint (check it with the host's "
                        "owner first; or write trust_host_key: under the host in the goal file); repeatable")
    _add_verbosity_flags(p)
    _add_model_flags(p)
    _add_context_flag(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("resume", help="go on with a run that was stopped (Ctrl-C, a signal, a crash, a kill), "
                                      "or with a chat",
                       description=_para("Go on with the scripted run recorded in TRANSCRIPT. The hosts are reached "
                                         "and inspected again first, its backups are read back on their hosts, and "
                                         "the goal file must still say what it said. A change that was running when "
                                         "the run stopped is never run again blindly: the model is told its outcome "
                                         "is unknown and must look first. The run goes on in a new transcript that "
                                         "links to the old one by the hash of its last line. A chat's transcript goes "
                                         "on as a chat on the same hosts, however it ended; the approvals given for "
                                         "its session carry over only if you say yes when shown them."),
                       epilog="examples:\n"
                              "  agent sessions                             the stopped runs, each with its resume "
                              "command\n"
                              "  agent resume ~/.local/share/upgrade-agent/transcripts/run-20260101-120000.jsonl\n\n"
                              + EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("transcript", help="the stopped run's or the chat's transcript (JSONL)")
    p.add_argument("--plain", action="store_true", help="a resumed chat: plain lines, no live panels")
    p.add_argument("--accept-unsealed", action="store_true",
                   help="resume a transcript this machine's record key did not seal (an older one, another machine's)")
    p.add_argument("--transcript", dest="transcript_out", metavar="PATH",
                   help="where to write the resumed part's transcript (default: a new file in the data dir)")
    p.add_argument("--json", action="store_true", help="print one JSON event per line instead of progress")
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust an unknown SSH host key with this SHA256:... fingerprint; repeatable")
    _add_model_flags(p)
    _add_context_flag(p)
    _add_verbosity_flags(p)
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("sessions", help="recent sessions: finished, interrupted or failed, and how to resume",
                       description=_para("List the recent sessions (newest first): those of the transcript directory "
                                         "and those written elsewhere (--transcript, agent demo --dir, a rollout's "
                                         "--dir); their status, hosts, goal and start, and for each interrupted run "
                                         "the command that resumes it. --prune removes the simulated hosts that no "
                                         "session needs any more (each takes some 30 MB), saying how much it freed."),
                       epilog="examples:\n"
                              "  agent sessions                    the last 20\n"
                              "  agent sessions --prune --dry-run  what --prune would remove\n"
                              "  agent sessions --prune --older-than 0\n\n"
                              "exit codes: 0 listed or pruned (also when there are none); 2 usage error",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON array of sessions (with --prune: what it removed)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N sessions (default 20)")
    p.add_argument("--dir", help="the transcript directory (default: where run, chat and demo write them)")
    p.add_argument("--prune", action="store_true",
                   help="remove the simulated hosts of finished or failed runs, demos and rollouts, and of every "
                        "session older than --older-than days; keeps those a session can still be resumed on, and "
                        "every transcript and report")
    p.add_argument("--older-than", type=float, default=7, metavar="DAYS",
                   help="with --prune: sessions started this many days ago or more lose their sims even if they "
                        "could be resumed (default 7)")
    p.add_argument("--dry-run", action="store_true", help="with --prune: say what would be removed, remove nothing")
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser("chat", help="interactive session; you approve risky steps in the terminal",
                       epilog=CHAT_EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_host_flags(p)
    p.add_argument("--plan", action="store_true", help="start in dry-run mode (/plan toggles it)")
    p.add_argument("--plain", action="store_true", help="plain lines instead of the rich terminal view")
    p.add_argument("--transcript", help="where to write the transcript")
    _add_verbosity_flags(p)
    _add_model_flags(p)
    _add_context_flag(p)
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("replay", help="re-drive recorded sessions; exit 1 with a diff at the first difference",
                       description=_para("Re-drive each recorded session through today's loop, validation and safety "
                                         "gate, with the model's turns and the tools' results taken from the "
                                         "transcript. The replay must make the same tool calls and the same safety "
                                         "decisions, and send the model the same conversation; the first difference "
                                         "is printed as a diff. Use it to check that a change to the gate or the "
                                         "tools decides old sessions as before."),
                       epilog="examples:\n"
                              "  agent replay transcripts/*.jsonl          every shipped session, one line each\n"
                              "  agent replay --json run.jsonl             one JSON object per transcript\n\n"
                              "exit codes: 0 every transcript replayed identically; 1 one differs or is damaged; "
                              "2 a file is missing",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("transcripts", nargs="+", help="transcript files (JSONL)")
    p.add_argument("--json", action="store_true", help="one JSON object per transcript")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("show", help="a readable timeline of a transcript; --verify checks its hash chain and seal",
                       description=_para("Print a transcript as a timeline: each model turn, tool call, safety "
                                         "decision and result. --verify checks every line, the hash chain and the seal (each "
                                         "line's MAC under this machine's record key) instead, and says whether it "
                                         "is sealed; "
                                         "--report and --html write what a reviewer reads."),
                       epilog="examples:\n"
                              "  agent show run.jsonl                      the timeline\n"
                              "  agent show --verify run.jsonl             has anything been changed or cut off?\n"
                              "  agent show --html run.html run.jsonl      one page to send, with the benchmark\n\n"
                              "exit codes: 0 shown, written, or intact; 1 the transcript is damaged; "
                              "2 no transcript there",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("transcript", help="a transcript file (JSONL), as `agent run` and `agent demo` print at the end")
    p.add_argument("--json", action="store_true", help="one normalized JSON object per step")
    p.add_argument("--verify", action="store_true",
                   help="check every line, the hash chain, the end event and the seal")
    p.add_argument("--report", action="store_true", help="write the Markdown report beside the transcript")
    p.add_argument("--html", metavar="OUT.html", help="write one self-contained page: timeline, folded outputs, "
                                                      "the before/after benchmark as a chart")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("tools", help="list the tools the model can call (--json: their schemas)")
    p.add_argument("--json", action="store_true", help="print the OpenAI tool schemas")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("classify", help="the safety layer's risk class of a shell command",
                       description=_para("Print the risk class (read-only, mutating, destructive, forbidden) and the "
                                         "rule that decided it; nothing is run. With no command, read commands from "
                                         "stdin, one per line, and print one JSON object per line."),
                       epilog="examples:\n"
                              "  agent classify nvidia-smi -L\n"
                              "  agent classify -- 'pip install torch==2.10.0 && rm -rf ~/.cache/pip'\n"
                              "  agent classify < commands.txt            one JSON object per line\n"
                              "  agent classify -- \"$cmd\" && echo \"runs without asking\"\n\n"
                              + CLASSIFY_EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON object: command, risk, reason, rule")
    p.add_argument("command", nargs="*", help="the command: the words after the options, or after -- "
                                              "(quote it to keep |, && and ; from your own shell)")
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("exec", help="run one command on a host through the host layer and the safety gate",
                       description=_para("Run COMMAND on HOST like the ssh_exec tool does. Read-only commands run; "
                                         "anything else is refused here (use chat to approve it). Everything after "
                                         "HOST is the command (as with ssh); options of exec go before it, or before "
                                         "a --. A pipeline fails when any stage fails (bash's pipefail), and the "
                                         "failing stage is named; a stage that a later one stopped reading (`... | "
                                         "head`) is no failure. The command runs in the host's read sandbox: "
                                         "the kernel refuses any write (but to $TMPDIR), device, privilege or "
                                         "connection beyond the loopback ports it names."),
                       epilog="examples:\n"
                              "  agent exec local nvidia-smi -L\n"
                              "  agent exec gpu1 --timeout 30 -- ls -la /usr/local\n"
                              "  agent exec root@127.0.0.1:2222 'dpkg -l | grep -i cuda'\n\n"
                              "exit codes: the command's own status; 1 the host could not be reached or the command "
                              "never finished; 2 usage error, an unknown host, or a host key unknown or changed (as "
                              "`agent run`); 3 refused (not read-only)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host", help="local, sim, user@host[:port], or a Host alias of ~/.ssh/config")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the remote process is killed")
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust this SHA256:... host key fingerprint of an unknown host")
    p.add_argument("--json", action="store_true", help="one JSON object: exit_code, stdout, stderr, ...")
    p.add_argument("--no-read-sandbox", action="store_true",
                   help="run it without the read sandbox (for a host where none can be set up: python3 missing, "
                        "or neither root nor Landlock); the gate's read-only judgement is then the only guard")
    p.add_argument("command", nargs="*", help="the command: everything after HOST (or after --)")
    p.set_defaults(func=cmd_exec)

    p = sub.add_parser("demo", help="the seed's CUDA 12.8 -> 13 upgrade on a fresh simulated GPU host",
                       description=_para("Upgrade a fresh simulated 8-GPU host from CUDA 12.8 to 13.0 (beside 12.8) "
                                         "and PyTorch from the cu128 to the cu130 wheels, benchmarking before and "
                                         "after, under the authorizations of goals/demo.yaml. With a model endpoint "
                                         "configured the model plans live; without one, the recorded model turns of "
                                         "transcripts/cuda13-upgrade.jsonl are played again (the screen says so). The "
                                         "tools, the safety gate and the host are real either way, and a new "
                                         "transcript and report are written. Needs bubblewrap."),
                       epilog="examples:\n"
                              "  agent demo                                 under a minute; it ends with where the "
                              "transcript is\n"
                              "  agent demo --ask                           you approve each change yourself\n"
                              "  agent demo --dir demo && agent show --html demo.html demo/demo.jsonl\n\n"
                              + EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust an unknown SSH host key with this SHA256:... fingerprint (check it with the host's "
                        "owner first; a fingerprint names one key, so it matches only the host that has it); "
                        "repeatable")
    p.add_argument("--ask", action="store_true", help="ask me to approve steps instead of the demo's goal file")
    p.add_argument("--dir", help="where to put the simulated host, transcript and report (default: a new temp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON event per line instead of progress")
    _add_verbosity_flags(p)
    _add_model_flags(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("recipe", help="turn a canary run's verified changes into a recipe file to review and roll out",
                       description=_para("Read TRANSCRIPT, a finished run whose goal was met, and write the recipe "
                                         "`agent fleet` rolls out: the canary's starting facts as preconditions, its "
                                         "backup, the changes that ran and ended ok with their arguments, the "
                                         "authorizations they needed, its passed checks and its before/after "
                                         "benchmark with a statistical gate. Read from the record only."),
                       epilog="examples:\n"
                              "  agent recipe run.jsonl -o cuda13.recipe.yaml\n"
                              "  agent recipe cuda13.recipe.yaml --ansible --canary 1 --batch 8 -o cuda13.yml\n"
                              "  ansible-playbook -i hosts.ini cuda13.yml",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("transcript", metavar="TRANSCRIPT|RECIPE",
                   help="the canary's transcript (.jsonl); with --ansible, a recipe (.yaml) or a transcript")
    p.add_argument("-o", "--output", help="the file to write (default: print it)")
    p.add_argument("--host", help="the canary, when the run had several hosts")
    p.add_argument("--accept-unsealed", action="store_true",
                   help="read a transcript this machine's record key did not seal (an older one, another machine's)")
    p.add_argument("--force", action="store_true", help="write over an existing file")
    p.add_argument("--ansible", action="store_true",
                   help="write an Ansible playbook of the recipe instead: the preflight, the backup first, the steps "
                        "with their approvals as comments, the checks as tasks that fail, the benchmark gate, a "
                        "rescue that restores the backup; serial and max_fail_percentage from the flags below")
    p.add_argument("--canary", type=int, default=1, help="with --ansible: hosts that go first, alone (default 1)")
    p.add_argument("--batch", type=int, default=4, help="with --ansible: hosts at once after the canary (default 4)")
    p.add_argument("--max-fail", type=float, default=0, metavar="PERCENT",
                   help="with --ansible: max_fail_percentage of each batch (default 0)")
    p.set_defaults(func=cmd_recipe)

    p = sub.add_parser("fleet", help="roll a recipe over an inventory: canary first, then batches, a failure limit",
                       description=_para("Roll RECIPE over the hosts of an Ansible inventory (INI or YAML). The "
                                         "canary hosts go first, then batches whose hosts run in parallel. Each "
                                         "host: its facts must match the recipe's preconditions (else it is held, "
                                         "unchanged), a verified backup, the benchmark before, the steps (each "
                                         "allowed only by the recipe's authorizations), the checks, the benchmark "
                                         "after and its gate; a host whose step, check or gate fails is restored "
                                         "from its backup. A failed canary, or failures over --max-fail, stop the "
                                         "rollout. Each host gets a transcript, tied together by fleet.jsonl."),
                       epilog="inventory variables: ansible_host, ansible_user, ansible_port, "
                              "ansible_ssh_private_key_file, ansible_connection=local; agent_transport=sim with "
                              "agent_sim={...} for a simulated host, agent_python, agent_path_prefix.\n\n"
                              "--ask: a held host (its driver, GPU, toolkits or torch differ from the canary's) "
                              "is offered to the model after the rollout, with the model flags below.\n\n"
                              "exit codes: 0 every host attempted ended changed or already at target (held hosts "
                              "are reported), or --check reached every host; "
                              "1 a host failed or could not be reached, or the rollout stopped; 2 a bad recipe, "
                              "inventory or flag; 130 Ctrl-C",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipe", help="the recipe (`agent recipe` writes one)")
    p.add_argument("--inventory", "-i", required=True, help="an Ansible inventory, INI or YAML")
    p.add_argument("--limit", "-l", help="groups or hosts to roll over (`gpu`, `gpu:!gpu07`, `a,b`); default all")
    p.add_argument("--canary", type=int, default=1, help="hosts that go first, alone (default 1)")
    p.add_argument("--batch", type=int, default=4, help="hosts at once after the canary (default 4)")
    p.add_argument("--max-fail", type=float, default=0, metavar="PERCENT",
                   help="stop when more than this share of the hosts attempted failed (default 0: the first)")
    p.add_argument("--dir", help="where the transcripts go (default: a new folder in the data dir)")
    p.add_argument("--resume", metavar="DIR", help="go on with the interrupted rollout in DIR (same recipe, inventory "
                                                   "and --limit): hosts with an outcome keep it; one a kill left "
                                                   "mid-change is first restored from the backup its record verified; "
                                                   "the rest go on in batches")
    p.add_argument("--check", action="store_true",
                   help="change nothing: inspect every host and say what a rollout would do with it (would change, "
                        "already at target, held and why, unreachable)")
    p.add_argument("--sims", metavar="DIR", help="where the simulated hosts live (default: DIR/sims of --dir); give "
                                                 "an earlier rollout's to roll over the same machines again")
    p.add_argument("--json", action="store_true", help="one JSON object per line: batches, hosts, the recap")
    p.add_argument("--trust-host-key", action="append", default=[], metavar="FINGERPRINT",
                   help="trust an unknown SSH host key with this SHA256:... fingerprint (check it with the host's "
                        "owner first; a fingerprint names one key, so it matches only the host that has it); "
                        "repeatable")
    p.add_argument("--ask", action="store_true",
                   help="once the batches are done, ask about each held host whether to hand it to the model in a "
                        "session of its own (at this terminal: you approve every change it makes there; the checks "
                        "and the gate judge it, and a failure is offered its rollback)")
    _add_model_flags(p)
    p.set_defaults(func=cmd_fleet)

    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description=_para("Print a completion script for the agent command: its subcommands and their "
                                         "options, as this version defines them."),
                       epilog="examples:\n"
                              "  source <(agent completion bash)            in ~/.bashrc\n"
                              "  source <(agent completion zsh)             in ~/.zshrc, after compinit\n"
                              "  agent completion bash > ~/.local/share/bash-completion/completions/agent",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=["bash", "zsh"], help="bash or zsh")
    p.set_defaults(func=cmd_completion)
    return parser


# Subcommands whose last argument is a shell command, and how many positionals come before it.
_COMMAND_AFTER = {"exec": 1, "classify": 0}


def split_command(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str] | None]:
    """`agent exec [options] HOST [options] CMD...` (or `... -- CMD...`): the command's words, taken
    whole, so that its own dashes are never read as our options (argparse alone mixes them up).

    The command starts after the first `--`, or, as with ssh, at the first word after HOST that is
    not an option of ours; what comes before is left to argparse (which reports unknown options).
    """
    if not argv or argv[0] not in _COMMAND_AFTER:
        return argv, None
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[argv[0]]
    valued = {o: a.nargs != 0 for a in sub._actions for o in a.option_strings}
    positionals = 0
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return argv[:i], argv[i + 1:]
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            # argparse takes a unique prefix of a long option (--time for --timeout) as the option.
            known = [name] if name in valued else [o for o in valued if name.startswith("--") and o.startswith(name)]
            i += 2 if len(known) == 1 and valued[known[0]] and "=" not in word else 1
            continue
        if positionals == _COMMAND_AFTER[argv[0]]:
            return argv[:i], argv[i:]
        positionals += 1
        i += 1
    return argv, None


def main(argv: list[str] | None = None) -> int:
    signals.install()
    try:
        return signals.exit_code_after_signal(_main(argv))
    except KeyboardInterrupt as e:
        # Whatever it interrupted (even before a session's closing() or after it), every transcript
        # opened in this process gets its end event. No session exists unless the loop was imported,
        # and importing it now could re-run a module the interrupt cut short.
        loop = sys.modules.get("agent.loop")
        closed = loop.close_open_sessions(interruption_reason(e)) if loop is not None else 0
        record = sys.modules.get("agent.record.transcript")
        removed = record.discard_unstarted() if record is not None else []
        if not closed and not _RUNNING:  # still reading the command line or the configuration
            print(f"agent: {interruption_reason(e)} before the command started: nothing ran on any host",
                  file=sys.stderr)
        elif not closed and _RUNNING[0] in _SESSION_COMMANDS:
            left = f" (its empty transcript {removed[0]} was removed)" if len(removed) == 1 else ""
            print(f"agent: {interruption_reason(e)} before the session started: nothing ran on any host{left}",
                  file=sys.stderr)
        return signals.exit_code_after_signal(ExitCode.INTERRUPTED)


# The command running, and those whose every host action happens inside a session: an interrupt that reaches
# main() with no session open came before any of them.
_RUNNING: list = []
_SESSION_COMMANDS = (cmd_run, cmd_chat, cmd_demo)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    argv, after = split_command(argv, parser)
    args = parser.parse_args(argv)
    if after is not None:
        args.command = [*getattr(args, "command", []), *after]
    if not getattr(args, "func", None):
        parser.print_help()
        return ExitCode.USAGE
    try:
        from app.config import apply_config, load_config  # lazy: tomllib only when a command runs

        apply_config(args, load_config(args.config))
        _RUNNING[:] = [args.func]
        return args.func(args)
    except SessionConfigError as e:  # configuration that cannot work: one line, exit 2
        return _fail(str(e))
    except RecordWriteError as e:  # the record cannot be kept: one line, exit 6
        return _fail(str(e), ExitCode.RECORD)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
