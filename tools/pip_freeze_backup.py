"""pip_freeze_backup: a verified, restorable record of one Python environment on a host.

Layout on the host (and, copied, beside the transcript):

    /var/tmp/upgrade-agent/backups/<backup_id>/
        python.txt  pip-version.txt  freeze.txt  list.json  inspect.json  pip-config.txt
        env.txt  indexes.json  manifest.json  SHA256SUMS

/var/tmp because it is writable by any user and, unlike /tmp, survives a reboot.
`restore_backup` reads the same layout (it imports the helpers below).
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import json
import re
import secrets
import shlex
import tarfile
import time
from dataclasses import dataclass

from pydantic import BaseModel, Field, field_validator

from tools.base import (
    PIP_ENV,
    Action,
    BackupRecord,
    Risk,
    RiskClass,
    StrictArgs,
    Tool,
    ToolContext,
    ToolError,
    sha256_hex,
    truncate_for_model,
)
from tools.hosts import Host, HostError
from tools.restore_check import unfetchable, why_unfetchable
from tools.restore_plan import (
    KEEP,
    configured_index_urls,
    index_for,
    rehearsable,
    resolves_without_installing,
    restore_plan,
)
from tools.system_state import SCRIPT as SYSTEM_SCRIPT
from tools.system_state import parse_system_state

BACKUP_ROOT = "/var/tmp/upgrade-agent/backups"

# The most one file of a backup may hold; an environment's freeze is kilobytes, its `pip inspect` a few MiB.
MAX_FILE_BYTES = 64 << 20


def backup_dir(backup_id: str) -> str:
    return f"{BACKUP_ROOT}/{backup_id}"


def interpreter(host: Host, python: str | None) -> str:
    return python or host.spec.python or "python3"


def parse_freeze(text: str) -> dict[str, str]:
    """`pip freeze` lines as {normalized name: requirement line}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[=<>!~ @;\[]", line, maxsplit=1)[0]
        out[normalize(name)] = line
    return out


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def without_own_settings(pip_config: str) -> str:
    """`pip config list` without the lines our own PIP_ENV adds (`:env:.no-input='1'`): not the environment's."""
    own = {f":env:.{name.removeprefix('PIP_').lower().replace('_', '-')}" for name in PIP_ENV}
    return "".join(line for line in pip_config.splitlines(keepends=True) if line.partition("=")[0] not in own)


@dataclass(frozen=True)
class Rehearsal:
    ok: bool | None  # None: not rehearsed (not asked for, or this pip cannot resolve without installing)
    says: str


def rehearse(ctx: ToolContext, host: Host, python: str, pip_version: str, freeze: str,
             indexes: dict[str, str | None], index_url: str | None = None) -> Rehearsal:
    """A restore rehearsed before any change needs one: could every pin be fetched again from the indexes a
    restore would use? pip resolves them (--dry-run, pip 22.2 and later) and installs nothing. A dry run in
    the environment itself shows as much as one in a scratch venv would, without creating one; a real install
    into a scratch venv would download a GPU stack's gigabytes of wheels."""
    frozen = {name: line for name, line in parse_freeze(freeze).items() if name not in KEEP}
    want = rehearsable(frozen)
    skipped = sorted(set(frozen) - set(want))
    aside = f"; not rehearsed, as they name a file or URL: {', '.join(skipped)}" if skipped else ""
    if not want:
        return Rehearsal(None, "nothing to rehearse: the environment has only pip, setuptools and wheel")
    if not resolves_without_installing(pip_version):
        return Rehearsal(None, f"not rehearsed: {pip_version.split(' from ')[0] or 'this pip'} is older than 22.2 "
                               "and cannot resolve without installing")
    started = time.monotonic()
    plan = restore_plan(python, want, indexes, "", have={}, index_url=index_url)
    # One install per index, as a restore runs them; each resolved at the same time as the others.
    with cf.ThreadPoolExecutor(max_workers=len(plan.commands)) as pool:
        said = list(pool.map(lambda c: unfetchable(ctx, host, c, wheels_only=True), plan.commands))
    took = f"{time.monotonic() - started:.1f}s"
    failed = [(c, words) for c, words in zip(plan.commands, said) if words is not None]
    if failed:
        missing = "; ".join(why_unfetchable(c, index_url) for c, _ in failed)
        todo = (f"the mirror {index_url} does not hold them all" if index_url else
                "take the backup again with index_url: a mirror that holds these versions, the one a restore "
                "would be given")
        return Rehearsal(False, f"a restore could not fetch every pin: {missing}; {todo}{aside}. pip said: "
                                + truncate_for_model("\n".join(words for _, words in failed), 1200) + f" ({took})")
    where = f"the mirror {index_url}" if index_url else "the indexes a restore uses"
    return Rehearsal(True, f"every one of the {len(want)} pins can be fetched again from {where} (pip resolved "
                           f"them as wheels without installing, {took}){aside}")


class PipFreezeBackup(Tool):
    """Back up a Python environment on a host, verified; required before any change to that host.

    Records the interpreter version, pip version,
    `pip freeze --all`, `pip list --format=json`, `pip inspect`, pip config, PIP_*/UV_* settings, the
    index each local-version package (e.g. torch 2.10.0+cu130) must be reinstalled from, and the system
    state an upgrade touches (CUDA toolkits under /usr/local, the `cuda` link, CUDA/NVIDIA packages, the
    driver), which restore_backup compares the host with and, with `system: true`, rolls back. The backup is
    written on the host under /var/tmp/upgrade-agent/backups/<id>/, copied beside the transcript, checked
    by sha256, and registered: mutating or destructive steps on a host are refused until a verified
    backup of it exists. Returns the backup id (restore_backup takes it), the package count and paths.
    `python`: the interpreter or venv python to back up (default: the host's configured one, else python3).
    The rollback is rehearsed before any change needs it: pip resolves every pin of the freeze (pip, setuptools
    and wheel aside) as wheels from the indexes a restore would use, without installing or building anything,
    and `rehearsal` says whether a restore could fetch them all (if not: take the backup again with
    `index_url`, a file:/// mirror on the host that holds them, and give restore_backup the same).
    Taking a backup needs no approval: it writes only its own new directory.
    """

    name = "pip_freeze_backup"
    pinned = ("python",)

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        python: str | None = Field(default=None, description="interpreter to back up, e.g. /opt/venv/bin/python")
        rehearse: bool = Field(default=True, description=(
            "check that a restore could fetch every pin again (pip resolves them without installing)"))
        index_url: str | None = Field(default=None, description=(
            "the mirror on the host a restore would be given (restore_backup's index_url), file:///..., for a "
            "machine without a route to PyPI: the rehearsal resolves the pins from it, searched first"))

        @field_validator("index_url")
        @classmethod
        def _mirror_on_the_host(cls, v: str | None) -> str | None:
            # A backup needs no approval, so what it makes the host reach stays on the host: a network index
            # named by the model would be a request to any address (and a way out for what the model read).
            # restore_backup checks a network mirror before it changes anything.
            if v is None:
                return None
            if not re.fullmatch(r"file:///[^\s'\"]+", v):
                raise ValueError(f"{v!r} is not a mirror on the host: give file:///... (a network mirror is checked "
                                 "by restore_backup itself, before it changes anything)")
            return v.rstrip("/")

    class Result(BaseModel):
        backup_id: str
        host: str
        python: str
        python_version: str
        pip_version: str
        package_count: int
        remote_dir: str
        local_dir: str | None
        files: dict[str, str]
        local_version_indexes: dict[str, str | None]
        warnings: list[str]
        verified: bool
        rehearsal: str = Field(default="", description="whether a restore could fetch every pin, as pip found")
        backup: BackupRecord

    def action(self, args) -> Action:
        # It writes only its own new directory, which is what lets later changes happen at all.
        return Action(host=args.host, subject=f"pip_freeze_backup python={args.python or '(default)'}",
                      risk=Risk(cls=RiskClass.MUTATING, rule="backup",
                                reason="writes a new backup directory under /var/tmp/upgrade-agent"),
                      args={"python": args.python}, defaults={"python": None},
                      interpreter=args.python)

    def run(self, ctx: ToolContext, args) -> "PipFreezeBackup.Result":
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        py = interpreter(host, args.python)
        q = shlex.quote(py)
        commands = {
            "python.txt": f"{q} -VV",
            "pip-version.txt": f"{q} -m pip --version",
            "freeze.txt": f"{q} -m pip freeze --all",
            "list.json": f"{q} -m pip list --format=json",
            "inspect.json": f"{q} -m pip inspect",
            "pip-config.txt": f"{q} -m pip config list",
            "env.txt": "env",
            "system.txt": SYSTEM_SCRIPT,
        }
        ctx.emit("progress", {"step": "collecting", "python": py})
        with cf.ThreadPoolExecutor(max_workers=len(commands)) as pool:
            futures = {name: pool.submit(host.run, cmd, timeout=300, env=PIP_ENV, cancel=ctx.cancel)
                       for name, cmd in commands.items()}
            results = {name: f.result() for name, f in futures.items()}
        if any(r.cancelled for r in results.values()):
            raise ToolError(f"the backup of {args.host} was cancelled {ctx.cancel_reason()}; nothing was written")
        for required in ("python.txt", "pip-version.txt", "freeze.txt", "list.json"):
            r = results[required]
            if not r.ok:
                detail = (r.stderr or r.stdout).strip()[-600:]
                raise ToolError(f"`{commands[required]}` failed on {args.host} (exit {r.exit_code}): {detail}; "
                                f"check the interpreter path (python={py})")
        warnings: list[str] = []
        files: dict[str, bytes] = {}
        for name in ("python.txt", "pip-version.txt", "freeze.txt", "list.json"):
            files[name] = results[name].stdout.encode()
        too_large = [n for n in files if len(files[n]) > MAX_FILE_BYTES]
        if too_large:
            raise ToolError(f"{', '.join(too_large)} of {args.host} would be over {MAX_FILE_BYTES >> 20} MiB: a package's "
                            "metadata is far larger than any environment's; nothing was written")
        if results["inspect.json"].ok and len(results["inspect.json"].stdout) > MAX_FILE_BYTES:
            # `pip inspect` holds every package's whole metadata, its long description too: one planted package
            # could make it gigabytes. The backup restores from freeze.txt and list.json; it goes without.
            warnings.append(f"`pip inspect` printed over {MAX_FILE_BYTES >> 20} MiB (a package's metadata is that "
                            "large): left out of the backup")
        elif results["inspect.json"].ok:
            files["inspect.json"] = results["inspect.json"].stdout.encode()
        else:
            warnings.append("`pip inspect` is not available (pip older than 22.2): list.json and freeze.txt only")
        # What the upgrade touches beyond Python (toolkits, the cuda link, CUDA/NVIDIA packages, the driver),
        # in a fixed order, so that restore_backup can compare the host with it.
        files["system.txt"] = parse_system_state(results["system.txt"].stdout).text().encode()
        files["pip-config.txt"] = ctx.redact(without_own_settings(results["pip-config.txt"].stdout)).encode()
        env_lines = [ln for ln in results["env.txt"].stdout.splitlines() if re.match(r"(PIP|UV)_[A-Z0-9_]*=", ln)]
        env_lines = [ln for ln in env_lines if not ln.startswith(tuple(PIP_ENV))]  # our own settings
        files["env.txt"] = ctx.redact("\n".join(env_lines) + ("\n" if env_lines else "")).encode()

        try:
            listed = json.loads(results["list.json"].stdout)
        except json.JSONDecodeError:
            raise ToolError(f"`pip list --format=json` on {args.host} did not print JSON") from None
        freeze = results["freeze.txt"].stdout
        configured = configured_index_urls(results["pip-config.txt"].stdout, env_lines)
        indexes: dict[str, str | None] = {}
        for pkg in listed:
            if "+" in pkg["version"]:
                url = index_for(pkg["name"], pkg["version"], configured)
                indexes[f"{pkg['name']}=={pkg['version']}"] = url
                if url is None:
                    warnings.append(f"{pkg['name']}=={pkg['version']}: no known index for this local version; "
                                    f"a restore needs its --index-url")
            if pkg.get("editable_project_location"):
                warnings.append(f"{pkg['name']} is an editable install from {pkg['editable_project_location']}: "
                                f"a restore cannot bring back its source tree")
        for line in freeze.splitlines():
            if " @ file://" in line:
                warnings.append(f"`{line.strip()}` points at a local file: restorable only while that file exists")
        files["indexes.json"] = json.dumps(indexes, indent=2, sort_keys=True).encode()

        created = time.time()
        safe_host = re.sub(r"[^A-Za-z0-9]+", "-", args.host).strip("-") or "host"
        backup_id = f"{safe_host}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(created))}-{secrets.token_hex(2)}"
        python_version = results["python.txt"].stdout.strip().splitlines()[0] if results["python.txt"].stdout else ""
        pip_version = results["pip-version.txt"].stdout.strip()
        manifest = {"backup_id": backup_id, "host": args.host, "python": py, "created_at": created,
                    "python_version": python_version, "pip_version": pip_version, "package_count": len(listed),
                    "warnings": warnings, "files": {n: sha256_hex(d) for n, d in files.items()}}
        files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True).encode()
        sums = {n: sha256_hex(d) for n, d in files.items()}
        files["SHA256SUMS"] = "".join(f"{h}  {n}\n" for n, h in sorted(sums.items())).encode()
        sums["SHA256SUMS"] = sha256_hex(files["SHA256SUMS"])

        remote = backup_dir(backup_id)
        # The rehearsal needs only the pins, so pip resolves them while the backup is written and checked.
        with cf.ThreadPoolExecutor(max_workers=1) as pool:
            rehearsed = pool.submit(rehearse, ctx, host, py, results["pip-version.txt"].stdout.strip(),
                                    freeze, indexes, args.index_url) if args.rehearse else None
            ctx.emit("progress", {"step": "writing", "dir": remote})
            self._write_remote(host, remote, files)
            check = host.run(f"cd {shlex.quote(remote)} && sha256sum -c --strict SHA256SUMS", timeout=120)
            rehearsal = rehearsed.result() if rehearsed is not None else Rehearsal(None, "not asked for")
        if rehearsal.ok is False:
            warnings.append("a restore could not fetch every pin: the rehearsal says which, and what to give")
        if not check.ok:
            raise ToolError(f"backup written to {remote} on {args.host} but it does not read back intact: "
                            f"{(check.stdout + check.stderr).strip()[-400:]}")
        # The copy beside the transcript is redacted like the transcript (a freeze line can hold a
        # token in a git URL); the host's copy stays whole, since a restore needs it. It is written
        # whole or not at all: a full disk here ends the session with one line (the record's error).
        copies = {n: ctx.redact(d.decode("utf-8", "replace")).encode() for n, d in files.items()}
        local = ctx.artifacts.save_folder(f"backup-{backup_id}", copies)
        local_dir, local_rel = local if local is not None else (None, None)
        if local_dir is not None:
            if any((local_dir / n).read_bytes() != d for n, d in copies.items()):
                raise ToolError(f"the local copy of backup {backup_id} in {local_dir} does not read back intact")
        # local_rel is relative to the transcript's folder: a transcript moved with its artifacts still finds it.
        record = BackupRecord(backup_id=backup_id, host=args.host, kind="pip-freeze", target=py, created_at=created,
                              remote_dir=remote, local_dir=local_rel, files=sums,
                              verified=True, package_count=len(listed), rehearsed=rehearsal.ok,
                              rehearsal=rehearsal.says, rehearsed_with=args.index_url)
        return self.Result(backup_id=backup_id, host=args.host, python=py, python_version=python_version,
                           pip_version=pip_version, package_count=len(listed), remote_dir=remote,
                           local_dir=record.local_dir, files=sums, local_version_indexes=indexes,
                           warnings=warnings, verified=True, rehearsal=rehearsal.says, backup=record)

    @staticmethod
    def _write_remote(host: Host, remote: str, files: dict[str, bytes]) -> None:
        """All files in one round trip: a tar stream unpacked into a new private directory."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for n, d in files.items():
                info = tarfile.TarInfo(n)
                info.size = len(d)
                info.mode = 0o600
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(d))
        q = shlex.quote(remote)
        # The backups' root lies in /var/tmp, which anyone on the host may write to: a link planted at one of
        # its levels would send the backup (as the user the session runs as) wherever it points, and a level
        # made by another user is theirs to change. Each level is ours and no link, and the backup's own
        # directory is new.
        levels = [BACKUP_ROOT.rsplit("/", 1)[0], BACKUP_ROOT]
        checks = " && ".join(
            f"{{ [ ! -L {shlex.quote(d)} ] || {{ echo '{d} is a symbolic link: no backup is written through it; "
            f"remove it' >&2; exit 3; }}; }} && mkdir -p {shlex.quote(d)} && {{ [ -O {shlex.quote(d)} ] || "
            f"{{ echo '{d} belongs to another user: no backup is written into it; remove it or give it to this "
            f"user' >&2; exit 3; }}; }}" for d in levels)
        r = host.run(f"umask 077 && {checks} && mkdir {q} && tar -x -C {q} --no-same-owner", stdin=buf.getvalue(),
                     timeout=120)
        if not r.ok:
            raise ToolError(f"cannot write the backup to {remote} on {host.name}: {r.stderr.strip()[-400:]}")

    def render(self, result) -> str:
        data = result.model_dump(mode="json", exclude={"backup", "files"})
        return json.dumps(data)


def read_backup(host: Host, backup_id: str, record: BackupRecord | None = None
                ) -> tuple[str, dict[str, str], dict[str, str | None], dict]:
    """Read and check a backup on its host: (dir, freeze lines by name, indexes, manifest).

    The host's SHA256SUMS only proves the files agree with each other: anyone who can edit the
    backup can rewrite it too. With the session's `record` of the backup, every file used is
    checked against the hashes taken when it was written.
    """
    if not re.fullmatch(r"[A-Za-z0-9-]+", backup_id):
        raise ToolError(f"{backup_id!r} is not a backup id (they look like sim-20260101-120000-ab12)")
    remote = backup_dir(backup_id)
    q = shlex.quote(remote)
    check = host.run(f"cd {q} && sha256sum -c --strict SHA256SUMS", timeout=120)
    if not check.ok:
        raise ToolError(f"backup {backup_id} on {host.name} is missing or damaged: "
                        f"{(check.stdout + check.stderr).strip()[-400:]}")
    data = {name: host.read_file(f"{remote}/{name}") for name in ("freeze.txt", "indexes.json", "manifest.json")}
    if record is not None:
        changed = [name for name, d in data.items() if sha256_hex(d) != record.files.get(name)]
        if changed:
            raise ToolError(f"backup {backup_id} on {host.name} was changed after it was taken: "
                            f"{', '.join(changed)} no longer match the hashes recorded in this session; "
                            f"take a new backup or restore by hand from the copy beside the transcript")
    try:
        indexes, manifest = json.loads(data["indexes.json"]), json.loads(data["manifest.json"])
    except json.JSONDecodeError as e:
        raise ToolError(f"backup {backup_id} on {host.name} is damaged: {e}") from None
    return remote, parse_freeze(data["freeze.txt"].decode()), indexes, manifest


