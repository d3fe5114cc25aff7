"""What the exported playbook runs on each host: one standard-library script, one subcommand a task.

`agent recipe RECIPE.yaml --ansible` (agent/fleet/ansible.py) writes a playbook whose tasks call this
script with the host's Python, `python - SUBCOMMAND VALUES [RUNTIME...]`: VALUES is the recipe's part as
JSON, written by the exporter; RUNTIME are what earlier tasks found (the backup's folder, a node's
drain). The playbook carries the script's text, after tools/bench_parsers.py and agent/fleet/stats.py,
so a benchmark is read and gated as `agent fleet` reads and gates it. No value ever reaches a shell:
every program is started from an argument list.

Each subcommand prints one JSON object on its last line of stdout ({"changed": bool, ...}); a failure
prints one line on stderr that says what failed and what it left, and exits 1. It runs on the
Python 3.8 and later of any host.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from types import SimpleNamespace

try:  # in the playbook, the text of these modules comes before this one
    read_metric  # noqa: B018
except NameError:
    from agent.fleet.stats import bootstrap_gate
    from tools.bench_parsers import ParseError, default_metric, higher_is_better, read_metric
    from tools.outputs_probe import client_argv, judge, last_json, printable, read_answers
    from tools.restore_plan import (
        KEEP,
        configured_index_urls,
        dry_run,
        index_for,
        rehearsable,
        resolves_without_installing,
        restore_plan,
    )
    from tools.system_state import CUDA_LINK, parse_system_state, system_rollback
    from tools.system_state import SCRIPT as SYSTEM_SCRIPT
    from tools.toolkit_sizes import Place, install_places, mount_and_free, needs_for, shortfalls
else:
    SYSTEM_SCRIPT = SCRIPT  # noqa: F821

BACKUP_ROOT = "/var/tmp/upgrade-agent/backups"  # the agent's own (tools/pip_freeze_backup.py)
CUDA_ROOT = "/usr/local"
# The constants below are the tools' own, which import pydantic and cannot travel; a test keeps them equal.
RUNFILE_NAME = re.compile(r"^cuda_(?P<cuda>\d+\.\d+\.\d+)_(?P<driver>\d+\.\d+(?:\.\d+)?)_linux(?:_sbsa)?\.run$")  # as the tool
MIN_DRIVER = {13: 580, 12: 525, 11: 450}
OUR_PREFIX = "upgrade-agent: "  # the drain reason's prefix, as drain_node sets it
ANNOTATION = "upgrade-agent/drained"
PIP_ENV = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_YES": "1"}


class Failed(Exception):
    """A step that did not do what it says: the message says what it found and what it left."""


def run(argv: list, timeout: float = 300, env: dict | None = None, stdin: bytes | None = None,
        cwd: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, check=False, capture_output=True, timeout=timeout, env=env, input=stdin, cwd=cwd)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, b"", f"{argv[0]}: not found".encode())
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, b"", f"timed out after {timeout:g} s".encode())


def out(r: subprocess.CompletedProcess) -> str:
    return r.stdout.decode("utf-8", "replace")


# A URL's password or token (https://user:TOKEN@host/...): what a message of ours shows is masked, as pip masks
# it, since an index the host's own pip configuration names may carry one that the recipe never held.
_CREDENTIAL = re.compile(r"(://[^/@\s:]*:)[^/@\s]+@")


def masked(text: str) -> str:
    return _CREDENTIAL.sub(r"\1****@", text)


def said(r: subprocess.CompletedProcess) -> str:
    text = (r.stderr or r.stdout).decode("utf-8", "replace").strip()
    return masked(text.splitlines()[-1][:400]) if text else f"exit {r.returncode}"


def must(argv: list, what: str, **kw) -> str:
    r = run(argv, **kw)
    if r.returncode != 0:
        raise Failed(masked(f"{what} failed (`{' '.join(argv)}`, exit {r.returncode}): {said(r)}"))
    return out(r)


def pip_env(own_config: bool) -> dict:
    """pip_install's environment: no PIP_* of the host and no configuration file, so only the recipe's indexes
    are read. A restore keeps the host's configuration, which names where its packages came from."""
    env = {k: v for k, v in os.environ.items() if own_config or not k.startswith("PIP_")}
    env.update(PIP_ENV)
    if not own_config:
        env["PIP_CONFIG_FILE"] = os.devnull
    return env


def freeze(python: str, own_config: bool = True) -> dict:
    return pins_of(must([python, "-m", "pip", "freeze", "--all"], "reading the environment", env=pip_env(own_config)))


def pins_of(text: str) -> dict:
    """A freeze's lines by normalized name."""
    pins = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[=@ ]", line, 1)[0]
        pins[re.sub(r"[-_.]+", "-", name).lower()] = line
    return pins


# --------------------------------------------------------------------------- preflight


def facts(values: dict) -> dict:
    """The facts a recipe's preconditions name, read as inspect_host reads them, and how they differ."""
    python = values.get("python") or sys.executable
    driver = out(run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])).strip()
    names = [ln.strip() for ln in out(run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])).splitlines()
             if ln.strip()]
    toolkits, links = {}, []
    for path in sorted(glob.glob(CUDA_ROOT + "/cuda-*")):
        if not os.path.isdir(path):
            continue
        nvcc = os.path.join(path, "bin", "nvcc")
        m = re.search(r"release (\d+\.\d+)", out(run([nvcc, "--version"]))) if os.access(nvcc, os.X_OK) else None
        version = m.group(1) if m else None
        if os.path.islink(path):
            links.append((os.path.realpath(path), version))
        else:
            toolkits[path] = version
    for target, version in links:  # a link to a listed toolkit is that toolkit, not another one
        if target not in toolkits:
            toolkits[target] = version
    torch = run([python, "-c", "import torch; print(torch.__version__)"], timeout=300)
    found = {"driver": driver.splitlines()[0].strip() if driver else None,
             "gpu_model": names[0] if names else None, "gpu_count": len(names),
             "toolkits": sorted(v for v in toolkits.values() if v),
             "torch": out(torch).strip().splitlines()[-1] if torch.returncode == 0 and out(torch).strip() else None}
    mismatches = [f"{key} is {found.get(key)!r}, the recipe was proven on {want!r}"
                  for key, want in (values.get("preconditions") or {}).items()
                  if want is not None and found.get(key) != want]
    return {"changed": False, "facts": found, "mismatches": mismatches}


# --------------------------------------------------------------------------- backup and restore


def backup(values: dict, host: str) -> dict:
    """The environment's freeze, the index each local-version pin comes from and the system state an upgrade
    touches, in a new private folder, by sha256; then the restore rehearsed as pip_freeze_backup rehearses it
    (tools/restore_plan.py's plan, resolved without installing). A host whose restore could not fetch every pin
    is held: {"held": why}, nothing changed but the backup's own folder."""
    python = values.get("python") or sys.executable
    files = {"python.txt": must([python, "-VV"], "reading the interpreter's version"),
             "pip-version.txt": must([python, "-m", "pip", "--version"], "reading pip's version", env=pip_env(True)),
             "freeze.txt": must([python, "-m", "pip", "freeze", "--all"], "pip freeze", env=pip_env(True)),
             "list.json": must([python, "-m", "pip", "list", "--format=json"], "pip list", env=pip_env(True)),
             "system.txt": must(["bash", "-c", SYSTEM_SCRIPT], "reading the system state")}
    if not files["system.txt"].rstrip().endswith("end"):
        raise Failed("the system state was not read to its end: no backup was written")
    config = run([python, "-m", "pip", "config", "list"], env=pip_env(True))
    settings = [f"{k}={v}" for k, v in os.environ.items() if re.match(r"(PIP|UV)_[A-Z0-9_]*$", k) and k not in PIP_ENV]
    configured = configured_index_urls(out(config) if config.returncode == 0 else "", settings)
    try:
        listed = json.loads(files["list.json"])
    except ValueError:
        raise Failed("`pip list --format=json` did not print JSON: no backup was written") from None
    indexes = {f"{p['name']}=={p['version']}": index_for(p["name"], p["version"], configured)
               for p in listed if "+" in p["version"]}
    files["indexes.json"] = json.dumps(indexes, indent=2, sort_keys=True)
    safe_host = re.sub(r"[^A-Za-z0-9]+", "-", host).strip("-") or "host"
    backup_id = f"{safe_host}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}-ansible"
    os.umask(0o077)
    for level in (os.path.dirname(BACKUP_ROOT), BACKUP_ROOT):
        if os.path.islink(level):
            raise Failed(f"{level} is a symbolic link: no backup is written through it; remove it")
        os.makedirs(level, exist_ok=True)
        if os.stat(level).st_uid != os.geteuid():
            raise Failed(f"{level} belongs to another user: no backup is written into it")
    folder = os.path.join(BACKUP_ROOT, backup_id)
    os.mkdir(folder)
    sums = []
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
        sums.append(f"{hashlib.sha256(text.encode()).hexdigest()}  {name}\n")
    with open(os.path.join(folder, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.write("".join(sorted(sums, key=lambda s: s.split()[1])))
    must(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"], "reading the backup back", cwd=folder)
    result = {"changed": True, "backup_dir": folder, "backup_id": backup_id, "packages": len(listed), "held": ""}
    if values.get("rehearse", True):
        result["held"] = rehearse(python, files["pip-version.txt"], pins_of(files["freeze.txt"]), indexes,
                                  values.get("index_url"))
    # A held host ends with changed=0, as one held in the preflight: its backup's folder is all that was written.
    result["changed"] = not result["held"]
    return result


def rehearse(python: str, pip_version: str, pins: dict, indexes: dict, index_url: str | None) -> str:
    """Why a restore could not fetch every pin of the freeze again, or "" when it could (or this pip cannot
    tell): each install of the restore's plan resolved as wheels, nothing installed or built."""
    want = rehearsable(pins)
    if not want or not resolves_without_installing(pip_version):
        return ""
    plan = restore_plan(python, want, indexes, "", have={}, index_url=index_url)
    lines = [line for line in (dry_run(c, wheels_only=True) for c in plan.commands) if line]
    import concurrent.futures as cf  # lazy: only where a rehearsal runs

    with cf.ThreadPoolExecutor(max_workers=max(1, len(lines))) as pool:
        done = list(pool.map(lambda line: run(shlex.split(line), timeout=600, env=pip_env(True)), lines))
    failed = [said(r) for r in done if r.returncode != 0]
    if not failed:
        return ""
    todo = (f"the mirror {index_url} does not hold them all" if index_url else
            "give the recipe's backup and restore index_url: a mirror that holds these versions")
    return f"its backup's rehearsal found pins a restore could not fetch again ({'; '.join(failed)}): {todo}"


def restore(values: dict, folder: str) -> dict:
    """Back to the backup, by the plan restore_backup runs (tools/restore_plan.py): what it did not have
    uninstalled, what differs reinstalled without dependencies from the index the backup recorded for it; with
    `system`, the cuda link put back and the toolkits installed since removed."""
    python = values.get("python") or sys.executable
    must(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"], "checking the backup", cwd=folder)
    with open(os.path.join(folder, "freeze.txt"), encoding="utf-8") as f:
        want = pins_of(f.read())
    try:
        with open(os.path.join(folder, "indexes.json"), encoding="utf-8") as f:
            indexes = json.load(f)
    except FileNotFoundError:  # a backup of an earlier export: the indexes its pins name
        indexes = {}
    plan = restore_plan(python, want, indexes, folder, have=freeze(python), index_url=values.get("index_url"))
    commands = []
    for command in plan.commands:
        must(shlex.split(command.line), command.what, env=pip_env(True), timeout=3600)
        commands.append(masked(command.line))
    system = []
    if values.get("system"):  # the link back, then the toolkits the backup did not have removed
        with open(os.path.join(folder, "system.txt"), encoding="utf-8") as f:
            then = parse_system_state(f.read())
        now = parse_system_state(must(["bash", "-c", SYSTEM_SCRIPT], "reading the system state"))
        if not (then.complete and now.complete):
            raise Failed("a reading of the system state is incomplete: the Python environment was restored, the "
                         "system state was not changed; roll it back by hand")
        for command in system_rollback(then, now).commands:
            must(["bash", "-c", command], f"`{command}`", timeout=600)
            system.append(command)
    now_pins = freeze(python)
    left = sorted(n for n in set(now_pins) | set(want) if n not in KEEP and now_pins.get(n) != want.get(n))
    if left:
        raise Failed(f"the environment still differs from the backup after the restore: {', '.join(left[:10])}")
    return {"changed": bool(commands or system), "commands": commands, "system_commands": system}


# --------------------------------------------------------------------------- steps


def install_runfile(a: dict) -> dict:
    """As tools/install_runfile.py: a side-by-side toolkit from a runfile whose checksum matches, its nvcc
    checked, the cuda link left where it was unless the step moves it."""
    name = a["runfile"].rstrip("/").rsplit("/", 1)[-1]
    m = RUNFILE_NAME.search(name)
    if not m or ".".join(m.group("cuda").split(".")[:2]) != a["version"]:
        raise Failed(f"{name!r} is not the CUDA {a['version']} runfile; nothing was written")
    algo, _, digest = a["checksum"].partition(":")
    target = a.get("toolkit_path") or f"{CUDA_ROOT}/cuda-{a['version']}"
    tmpdir = a.get("tmpdir") or "/tmp"
    is_url = "://" in a["runfile"]
    path = os.path.join(a.get("download_dir") or tmpdir, name) if is_url else a["runfile"]
    driver = out(run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])).strip()
    need = MIN_DRIVER.get(int(a["version"].split(".")[0]))
    if driver and need and int(driver.split(".")[0]) < need:
        raise Failed(f"driver {driver.splitlines()[0]} is too old for CUDA {a['version']}; nothing was written")
    if os.path.lexists(target):
        raise Failed(f"{target} already exists: a side-by-side install needs a new directory; nothing was written")
    if not a.get("override") and run(["bash", "-c", "command -v gcc"]).returncode != 0:
        raise Failed("no gcc on PATH: the runfile's installer refuses to run without a compiler; nothing was written")
    # As install_runfile: what the install needs (tools/toolkit_sizes.py) against what each filesystem has.
    needs = needs_for(a["version"], None, _runfile_size(a["runfile"], path))
    places = [] if needs is None else [Place(where, need, why, *mount_and_free(_shell, where))
                                       for where, need, why in install_places(needs, tmpdir, target)]
    short = shortfalls(places)
    if short:
        raise Failed(f"not enough space to install CUDA {a['version']}: {'; '.join(short)} (figures: {needs.source}); "
                     "nothing was written")
    if is_url:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        must(["curl", "-fsSL", "--retry", "3", "-C", "-", "-o", path, "--", a["runfile"]], f"downloading {name}",
             timeout=float(a.get("timeout") or 3600))
    summed = out(run([f"{algo}sum", "--", path], timeout=600)).split()
    if summed[:1] != [digest]:
        raise Failed(f"checksum mismatch for {path}: expected {algo} {digest}, got {summed[0] if summed else 'no file'};"
                     " it was not run")
    link_before = os.readlink(CUDA_LINK) if os.path.islink(CUDA_LINK) else None
    flags = ["--silent", "--toolkit", f"--toolkitpath={target}", "--no-man-page", f"--tmpdir={tmpdir}"]
    if a.get("override"):
        flags.append("--override")
    if not a.get("toolkit_only", True):
        flags = [f for f in flags if not f.startswith("--toolkit")] + ["--driver", "--toolkit"]
    r = run(["sh", path, *flags], timeout=float(a.get("timeout") or 3600))
    if r.returncode != 0:
        raise Failed(f"the installer failed (exit {r.returncode}): {said(r)}; {target} may be partly installed "
                     "(the rollback removes it)")
    nvcc = re.search(r"release (\d+\.\d+)", out(run([os.path.join(target, "bin", "nvcc"), "--version"])))
    if not nvcc or nvcc.group(1) != a["version"]:
        raise Failed(f"the installer exited 0 but {target}/bin/nvcc reports {nvcc.group(1) if nvcc else 'nothing'}")
    link_after = os.readlink(CUDA_LINK) if os.path.islink(CUDA_LINK) else None
    if a.get("move_symlink"):
        must(["ln", "-sfn", target, CUDA_LINK], "moving the cuda link")
    elif link_before is not None and link_after != link_before:  # the installer moved it unasked: back
        must(["ln", "-sfn", link_before, CUDA_LINK], "putting the cuda link back")
    removed = False
    if is_url and not a.get("download_dir"):  # downloaded into the temporary directory: gone once verified
        try:
            os.remove(path)
            removed = True
        except OSError:
            pass
    return {"changed": True, "toolkit_path": target, "nvcc": nvcc.group(1), "runfile_removed": removed}


def _runfile_size(runfile: str, path: str) -> int | None:
    if "://" in runfile and not runfile.startswith("file://"):
        sizes = re.findall(r"(?im)^content-length:\s*(\d+)", out(run(["curl", "-fsIL", "--", runfile], timeout=60)))
        return int(sizes[-1]) if sizes else None
    local = runfile[len("file://"):] if runfile.startswith("file://") else path
    return os.path.getsize(local) if os.path.isfile(local) else None


def _shell(command: str):
    """`command` in bash, as toolkit_sizes.mount_and_free asks: its output, and whether it succeeded."""
    done = run(["bash", "-c", command])
    return SimpleNamespace(ok=done.returncode == 0, stdout=out(done))


def pip_install(a: dict) -> dict:
    """As tools/pip_install.py: exact pins from exactly the recipe's indexes, the host's pip settings unread."""
    python = a.get("python") or sys.executable
    before = freeze(python, own_config=False)
    argv = [python, "-m", "pip", "install", "--no-input", "--index-url", a["index_url"]]
    for url in a.get("extra_index_urls") or []:
        argv += ["--extra-index-url", url]
    if a.get("no_deps"):
        argv.append("--no-deps")
    must([*argv, "--", *a["packages"]], "pip install", env=pip_env(False), timeout=1800)
    after = freeze(python, own_config=False)
    changes = [f"{n}: {before.get(n)} -> {after.get(n)}" for n in sorted(set(before) | set(after))
               if before.get(n) != after.get(n)]
    return {"changed": bool(changes), "changes": changes}


def check_toolkit(a: dict) -> dict:
    nvcc = os.path.join(a["path"], "bin", "nvcc")
    m = re.search(r"release (\d+\.\d+)", out(run([nvcc, "--version"])))
    if not m or m.group(1) != a["version"]:
        raise Failed(f"{nvcc} reports {m.group(1) if m else 'nothing'}, the check wants {a['version']}")
    return {"changed": False, "nvcc": m.group(1)}


def check_command(a: dict) -> dict:
    r = run(["bash", "-c", a["run"]], timeout=600)
    if r.returncode != a.get("expect_exit", 0):
        raise Failed(f"`{a['run']}` exited {r.returncode}, the check wants {a.get('expect_exit', 0)}: {said(r)}")
    if a.get("expect_output") is not None and a["expect_output"] not in out(r):
        raise Failed(f"`{a['run']}` did not print {a['expect_output']!r}")
    return {"changed": False}


# --------------------------------------------------------------------------- benchmark and gate


def bench(a: dict, label: str) -> dict:
    """warmup + runs of the benchmark, one metric read from each measured run, as run_bench reads it."""
    metric = a.get("metric") or default_metric(a["parser"])
    env = dict(os.environ, **(a.get("env_before") if label == "before" else a.get("env_after")) or {})
    values = []
    for i in range(int(a.get("warmup") or 0) + int(a["runs"])):
        r = run(["bash", "-c", a["command"]], timeout=float(a.get("timeout") or 1800), env=env, cwd=a.get("cwd"))
        if r.returncode != 0:
            raise Failed(f"the benchmark ({label}, run {i + 1}) exited {r.returncode}: {said(r)}")
        if i >= int(a.get("warmup") or 0):
            try:
                found = read_metric(a["parser"], metric, out(r))
            except ParseError as e:
                raise Failed(f"the benchmark ({label}, run {i + 1}): {e}") from None
            values.append(found.value)
            unit = found.unit
    return {"changed": False, "label": label, "metric": metric, "values": values,
            "higher_is_better": higher_is_better(metric, unit)}


def gate(a: dict, before: str, after: str) -> dict:
    b, f = json.loads(before), json.loads(after)
    g = a.get("gate") or {}
    result = bootstrap_gate(b["values"], f["values"], float(g.get("max_drop_percent", 2.0)),
                            float(g.get("confidence", 0.95)), f.get("higher_is_better"), metric=f["metric"])
    if not result.passed:
        raise Failed(f"the benchmark gate failed: {result.detail}")
    return {"changed": False, **result.as_dict()}


# --------------------------------------------------------------------------- the served model's answers


def outputs(a: dict, label: str) -> dict:
    """What the served model answers to check_outputs' prompts, asked and read as the tool does
    (tools/outputs_probe.py, carried before this script)."""
    max_tokens, timeout = int(a.get("max_tokens") or 24), float(a.get("timeout") or 300)
    r = run(client_argv(sys.executable, a["endpoint"], a.get("model"), max_tokens, timeout), timeout=timeout + 30)
    answered = last_json(out(r)) or {}
    if r.returncode != 0 or not isinstance(answered.get("outputs"), list):
        why = answered.get("answered") or answered.get("error") or said(r)
        raise Failed(f"the served model's answers ({label}) at {a['endpoint']}: {printable(str(why), 300)}")
    return {"changed": False, "label": label, **read_answers(answered, max_tokens)}


def outputs_gate(a: dict, before: str, after: str) -> dict:
    ok, detail = judge(json.loads(after), json.loads(before), bool(a.get("same")),
                       float(a.get("max_accuracy_drop") or 0.0), ("after", "before"))
    if not ok:
        raise Failed(f"the answers check failed: {detail}")
    return {"changed": False, "detail": detail}


# --------------------------------------------------------------------------- drain


def _slurm(node: str) -> tuple[str, str | None, int]:
    shown = must(["scontrol", "show", "node", node, "-o"], "scontrol show node")
    state = re.search(r"\bState=(\S+)", shown)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?=\s+\w+=|$)", shown)
    jobs = must(["squeue", "-h", "-w", node, "-t", "RUNNING,COMPLETING", "-o", "%i"], "squeue")
    text = reason.group(1).strip() if reason else None
    return (state.group(1) if state else ""), (None if text in (None, "", "(null)", "none") else text), \
        len([ln for ln in jobs.splitlines() if ln.strip()])


def _kube(node: str) -> tuple[bool, str | None]:
    shown = must(["kubectl", "get", "node", node, "-o",
                  "jsonpath={.spec.unschedulable}|{.metadata.annotations.upgrade-agent/drained}"], "kubectl get node")
    cordoned, _, ours = shown.strip().partition("|")
    return cordoned.strip() == "true", ours.strip() or None


def drain(a: dict, node: str) -> dict:
    """As drain_node: a node already drained (by anyone) is left as it is and never undrained by us."""
    drain_id = secrets.token_hex(4)
    mark = f"{a['reason']} #{drain_id}"
    began = time.monotonic()
    if a["scheduler"] == "slurm":
        state, reason, _ = _slurm(node)
        if "DRAIN" in state.upper():
            return {"changed": False, "drained_by_us": False, "drain_id": None, "reason_before": reason}
        must(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={OUR_PREFIX}{mark}"], "scontrol update")
        while _slurm(node)[2]:
            if time.monotonic() - began > float(a.get("timeout") or 3600):
                raise Failed(f"node {node} is drained, but jobs still run on it; it stays drained")
            time.sleep(0.5)
    else:
        cordoned, ours = _kube(node)
        if cordoned:
            return {"changed": False, "drained_by_us": False, "drain_id": None, "reason_before": ours}
        must(["kubectl", "annotate", "node", node, "--overwrite", f"{ANNOTATION}={mark}"], "kubectl annotate")
        must(["kubectl", "cordon", node], "kubectl cordon")
        must(["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
              f"--timeout={int(float(a.get('timeout') or 3600))}s"], "kubectl drain",
             timeout=float(a.get("timeout") or 3600) + 60)
    return {"changed": True, "drained_by_us": True, "drain_id": drain_id}


def undrain(a: dict, node: str, drained: str) -> dict:
    d = json.loads(drained)
    if not d.get("drained_by_us"):
        return {"changed": False, "undrained": False, "why": "not drained by this play: left as it is"}
    mark = f"{a['reason']} #{d['drain_id']}"
    if a["scheduler"] == "slurm":
        state, reason, _ = _slurm(node)
        if "DRAIN" not in state.upper():
            return {"changed": False, "undrained": False, "why": "not drained"}
        if reason != OUR_PREFIX + mark:
            raise Failed(f"node {node} is drained by someone else now (reason {reason!r}): it stays drained")
        must(["scontrol", "update", f"nodename={node}", "state=resume"], "scontrol update")
    else:
        cordoned, ours = _kube(node)
        if not cordoned:
            return {"changed": False, "undrained": False, "why": "not cordoned"}
        if ours != mark:
            raise Failed(f"node {node} is cordoned by someone else now ({ANNOTATION} {ours!r}): it stays cordoned")
        must(["kubectl", "uncordon", node], "kubectl uncordon")
        must(["kubectl", "annotate", "node", node, f"{ANNOTATION}-"], "kubectl annotate")
    return {"changed": True, "undrained": True}


COMMANDS = {
    "facts": lambda v, rest: facts(v),
    "backup": lambda v, rest: backup(v, rest[0]),
    "restore": lambda v, rest: restore(v, rest[0]),
    "install_runfile": lambda v, rest: install_runfile(v),
    "pip_install": lambda v, rest: pip_install(v),
    "check_toolkit": lambda v, rest: check_toolkit(v),
    "check_command": lambda v, rest: check_command(v),
    "bench": lambda v, rest: bench(v, rest[0]),
    "gate": lambda v, rest: gate(v, rest[0], rest[1]),
    "outputs": lambda v, rest: outputs(v, rest[0]),
    "outputs_gate": lambda v, rest: outputs_gate(v, rest[0], rest[1]),
    "drain": lambda v, rest: drain(v, rest[0]),
    "undrain": lambda v, rest: undrain(v, rest[0], rest[1]),
}


def main(argv: list) -> int:
    if len(argv) < 2 or argv[0] not in COMMANDS:
        print(f"usage: python - {{{','.join(COMMANDS)}}} VALUES_JSON [RUNTIME...]", file=sys.stderr)
        return 2
    try:
        result = COMMANDS[argv[0]](json.loads(argv[1]), argv[2:])
    except Failed as e:
        print(str(e), file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
