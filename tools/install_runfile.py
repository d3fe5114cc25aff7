"""install_runfile: a CUDA toolkit from NVIDIA's runfile, side by side, checked before and after.

Preflight runs before anything is written: the runfile's name and the requested version
agree, the driver supports that CUDA, the target does not exist, a gcc is on PATH (the
installer's own first check, unless `override`), the temp dir and the target have room, and
root (or a password-less `sudo -n`) is there when needed. Then: download with resume,
checksum, the installer with toolkit-only flags, its log, the new nvcc, and the `cuda` symlink
before and after. When the installer fails, the error says what it said, what its log says, and
what it left: the checksum, the symlink, the target directory and the downloaded runfile.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import time

from pydantic import BaseModel, Field, field_validator

from tools.base import (
    Action,
    Risk,
    RiskClass,
    StrictArgs,
    Tool,
    ToolContext,
    ToolError,
    file_url,
    norm_path,
    run_live,
    truncate_for_model,
)
from tools.hosts import HostError
from tools.toolkit_sizes import (Place, header_payload_bytes, install_places, mount_and_free, needs_for,
                                 read_header_command, shortfalls)

# Where a runfile may come from: https://host/path, file:///path or /path, in safe characters only.
RUNFILE_SOURCE = re.compile(r"^(?:https://[A-Za-z0-9.-]+(?::\d+)?/|file:///|/)[A-Za-z0-9._+/-]+$")
RUNFILE_NAME = re.compile(r"^cuda_(?P<cuda>\d+\.\d+\.\d+)_(?P<driver>\d+\.\d+(?:\.\d+)?)_linux(?:_sbsa)?\.run$")
INSTALLER_LOG = "/var/log/cuda-installer.log"

# Minimum driver branch for each CUDA major (NVIDIA's minor-version compatibility table).
MIN_DRIVER = {13: 580, 12: 525, 11: 450}

# Directories whose files nobody keeps: a runfile the tool downloaded there goes when the install fails.
TEMPORARY_DIRS = ("/tmp", "/var/tmp")


class InstallRunfile(Tool):
    """Install a CUDA toolkit from NVIDIA's .run installer, side by side with the toolkits already there.

    By default toolkit only (never the driver) into its own directory (/usr/local/cuda-X.Y), leaving the
    `cuda` symlink where it is. Before writing anything it checks: the runfile name matches `version`,
    the installed driver supports that CUDA (13.x needs driver >= 580, 12.x >= 525), tmpdir, download_dir
    and the target are where their text says as the host resolves them (a symbolic link or `..` on the
    way is refused, naming where it leads), the target does not exist, a gcc on PATH (the installer
    refuses to run without one unless `override: true`), the free space the install needs in the temp dir,
    the target and the download dir, summed where they share a filesystem (from the runfile's own header
    where it is on the host, else NVIDIA's figures for the release: 13.0 unpacks about 8 GiB, installs about
    6.7 GiB), and root or a password-less `sudo -n`. A backup lists and a restore removes the toolkits at
    /usr/local/cuda-* only: a toolkit_path anywhere else is not undone by one, and needs its own approval. Then it fetches the runfile into download_dir on the host (made if
    missing; resumable over https, copied from a file:// mirror; skipped if the file is already there with
    the right checksum), verifies the checksum NVIDIA publishes (md5) or a sha256, runs the installer
    silently with --toolkit --toolkitpath, reads the installer log of this run, checks the new nvcc, and
    reports the symlink before and after. A runfile it fetched into a temporary directory is removed
    once the toolkit is verified, or when the installer fails; the directory stays. If the installer
    fails, the error gives its message and log, the checksum, the symlink before and after, whether the
    target directory exists, and where the runfile is. `toolkit_only: false` or `move_symlink: true`
    make it destructive.
    """

    name = "install_runfile"
    # The checksum is verified by the tool itself and the timeout bounds it: neither changes what is installed.
    pinned = ("version", "runfile", "toolkit_path", "tmpdir", "download_dir", "toolkit_only", "move_symlink",
              "override")

    @classmethod
    def canonical(cls, name: str, value):
        if name == "runfile" and isinstance(value, str):
            return file_url(value)
        if name in ("toolkit_path", "tmpdir", "download_dir") and isinstance(value, str):
            return norm_path(value)
        return value

    class Args(StrictArgs):
        host: str = Field(description="host in this session")
        runfile: str = Field(description="URL of the runfile (https://developer.download.nvidia.com/.../"
                                         "cuda_13.0.1_580.82.07_linux.run) or its path on the host")
        checksum: str = Field(description="published checksum: md5 (32 hex digits, as NVIDIA publishes) or "
                                          "sha256 (64), optionally prefixed md5: or sha256:")
        version: str = Field(description="CUDA version X.Y, e.g. 13.0", pattern=r"^\d+\.\d+$")
        toolkit_path: str | None = Field(default=None, description="install directory (default /usr/local/cuda-X.Y)")
        tmpdir: str = Field(default="/tmp", description="installer temp dir (it unpacks the whole runfile "
                                                        "there: about 8 GiB for 13.0)")
        download_dir: str | None = Field(default=None, description="where to download (default: tmpdir)")
        toolkit_only: bool = Field(default=True, description="install the toolkit only, never the driver")
        move_symlink: bool = Field(default=False, description="point <cuda_root>/cuda at the new toolkit")
        override: bool = Field(default=False, description="pass --override (skip the installer's compiler check)")
        timeout: int = Field(default=3600, ge=60, le=14400, description="seconds for download and install")

        @field_validator("runfile")
        @classmethod
        def _runfile_shape(cls, v: str) -> str:
            """A plain https:// URL, a file:/// URL or an absolute host path, ending in a runfile's name: no
            query, fragment, percent-escape, `..`, authority in a file URL, quote, space or shell character,
            so the file the gate approves is the file that runs."""
            m = RUNFILE_SOURCE.match(v)
            if not m or "/../" in v + "/" or "/./" in v + "/" or not RUNFILE_NAME.match(v.rsplit("/", 1)[-1]):
                raise ValueError(f"{v[:200]!r} is not a runfile source: give https://HOST/PATH/cuda_X.Y.Z_DRIVER_linux.run, "
                                 "file:///PATH/cuda_X.Y.Z_DRIVER_linux.run or /PATH/cuda_X.Y.Z_DRIVER_linux.run "
                                 "(letters, digits and ._+-/ only)")
            return v

        @field_validator("toolkit_path", "tmpdir", "download_dir")
        @classmethod
        def _a_path(cls, v: str | None) -> str | None:
            """An absolute path of printable characters: a NUL or a newline cannot name a place on the host."""
            if v is not None and (not v.startswith("/") or any(ord(ch) < 32 or ord(ch) == 127 for ch in v)):
                raise ValueError(f"{v[:200]!r} is not an absolute path of printable characters")
            return v

        @field_validator("checksum")
        @classmethod
        def _checksum_shape(cls, v: str) -> str:
            algo, digest = split_checksum(v)
            if algo is None:
                raise ValueError("checksum must be 32 hex digits (md5) or 64 (sha256), optionally 'md5:'/'sha256:'")
            return f"{algo}:{digest}"

    class Result(BaseModel):
        version: str
        runfile: str
        downloaded: bool
        # A runfile this call downloaded into a temporary directory is removed once the toolkit is verified
        # (about 4 GB left on every host otherwise); one in another download_dir, or given as a path, stays.
        runfile_removed: bool = False
        checksum: str
        checksum_ok: bool
        toolkit_path: str
        nvcc_version: str | None
        nvcc_build: str | None
        symlink_before: str | None
        symlink_after: str | None
        installer_command: str
        installer_summary: str
        log_errors: list[str]
        log_tail: str
        warnings: list[str]
        seconds: dict[str, float]

    def action(self, args) -> Action:
        target = args.toolkit_path or f"/usr/local/cuda-{args.version}"
        flags = "toolkit-only" if args.toolkit_only else "toolkit+driver"
        # Everything that changes what runs is in the subject an approval binds to.
        subject = f"install_runfile CUDA {args.version} {flags} to {target}" + (
            ", move the cuda symlink" if args.move_symlink else "") + (", --override" if args.override else "") + \
            f" from {args.runfile} ({args.checksum}), tmpdir {args.tmpdir}" + (
            f", download to {args.download_dir}" if args.download_dir else "")
        if not args.toolkit_only:
            risk = Risk(cls=RiskClass.DESTRUCTIVE, rule="tool:install_runfile:driver",
                        reason="a runfile without toolkit-only flags installs the driver")
        elif args.move_symlink:
            risk = Risk(cls=RiskClass.DESTRUCTIVE, rule="tool:install_runfile:symlink",
                        reason="moves the cuda symlink that every build and job on the host follows")
        else:
            risk = Risk(cls=RiskClass.MUTATING, rule="tool:install_runfile:side-by-side",
                        reason="installs a toolkit into a new directory beside the existing ones")
        c = self.canonical
        tmpdir = c("tmpdir", args.tmpdir)
        return Action(host=args.host, subject=subject, risk=risk,
                      args={"version": args.version, "runfile": c("runfile", args.runfile),
                            "toolkit_path": c("toolkit_path", target), "tmpdir": tmpdir,
                            "download_dir": c("download_dir", args.download_dir or args.tmpdir),
                            "toolkit_only": args.toolkit_only, "move_symlink": args.move_symlink,
                            "override": args.override},
                      # Left out, these are: the version's own directory, /tmp, the tmpdir, and safe flags.
                      defaults={"toolkit_path": f"/usr/local/cuda-{args.version}", "tmpdir": "/tmp",
                                "download_dir": tmpdir, "toolkit_only": True, "move_symlink": False,
                                "override": False})

    # ------------------------------------------------------------------ run

    def run(self, ctx: ToolContext, args) -> "InstallRunfile.Result":
        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None
        timings: dict[str, float] = {}
        warnings: list[str] = []
        algo, digest = split_checksum(args.checksum)
        name = args.runfile.rstrip("/").rsplit("/", 1)[-1]
        m = RUNFILE_NAME.search(name)
        if not m:
            raise ToolError(f"{name!r} does not look like a CUDA runfile (cuda_X.Y.Z_DRIVER_linux.run)")
        if ".".join(m.group("cuda").split(".")[:2]) != args.version:
            raise ToolError(f"the runfile is CUDA {m.group('cuda')} but version {args.version} was asked for")
        is_url = "://" in args.runfile
        # As given, for the check that each is the place it names (_resolves_to_itself); normalised for every
        # command after it, the installer's included (a path that only spells its place oddly still names it).
        given = {"tmpdir": args.tmpdir, "download_dir": args.download_dir or args.tmpdir,
                 "toolkit_path": args.toolkit_path or f"/usr/local/cuda-{args.version}"}
        tmpdir, download_dir, target = (posixpath.normpath(given[k]) for k in ("tmpdir", "download_dir", "toolkit_path"))
        path = f"{download_dir}/{name}" if is_url else args.runfile
        cuda_link = "/usr/local/cuda"

        stage = {"now": "preflight", "writes": "nothing was written", "installed": False}

        def sh(cmd: str, timeout: float = 120, what: str | None = None):
            if what:
                ctx.emit("progress", {"step": what})
                stage["now"] = what
            # Once the installer has run, the short checks and the symlink repair always finish:
            # a cancel then would only hide what was installed.
            result = run_live(ctx, host, cmd, timeout=timeout, cancel=None if stage["installed"] else ctx.cancel)
            if result.cancelled:
                raise ToolError(f"cancelled {ctx.cancel_reason()} during {stage['now']}; the command was killed "
                                f"and {stage['writes']}")
            return result

        # ---------------------------------------------------------- preflight (writes nothing)
        t0 = time.monotonic()
        major = int(args.version.split(".")[0])
        need = MIN_DRIVER.get(major)
        drv = sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader", what="preflight")
        driver = drv.stdout.strip().splitlines()[0].strip() if drv.ok and drv.stdout.strip() else None
        if driver is None:
            warnings.append("no NVIDIA driver answered nvidia-smi: the toolkit installs, but nothing can run on a GPU")
        elif need is not None and int(driver.split(".")[0]) < need:
            raise ToolError(f"driver {driver} is too old for CUDA {args.version}: CUDA {major}.x needs driver >= "
                            f"{need} (this runfile was built with {m.group('driver')}). Upgrade the driver first, "
                            f"or pick a CUDA {major - 1}.x runfile; nothing was written")
        if not args.toolkit_only and driver is not None:
            raise ToolError(f"driver {driver} is loaded: the runfile cannot replace a driver that is in use. "
                            f"Install the toolkit only (toolkit_only: true); nothing was written")
        _resolves_to_itself(sh, given)
        exists = sh(f"test -e {shlex.quote(target)} && echo exists || echo free")
        if exists.stdout.strip() == "exists":
            raise ToolError(f"{target} already exists: a side-by-side install needs a new directory. Choose "
                            f"another toolkit_path, or check what is there first; nothing was written")
        if not args.override:
            compiler = sh("command -v gcc")
            if not (compiler.ok and compiler.stdout.strip()):
                raise ToolError(no_compiler(args.host))
        self._check_space(sh, args, path, is_url, tmpdir, download_dir, target)
        sudo = ""
        writable = sh(f"d={shlex.quote(_parent(target))}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; "
                      f"test -w \"$d\" && echo yes || echo no")
        if writable.stdout.strip() != "yes":
            who = sh("id -u")
            if who.stdout.strip() != "0":
                probe = sh("sudo -n true")
                if not probe.ok:
                    raise ToolError(f"installing into {_parent(target)} needs root, and `sudo -n` on {args.host} "
                                    f"wants a password ({probe.stderr.strip()[:200]}). Run as root or allow "
                                    f"password-less sudo for the installer; passwords are never asked for")
                sudo = "sudo -n "
        link_before = _readlink(sh, cuda_link)
        timings["preflight"] = round(time.monotonic() - t0, 3)

        # ---------------------------------------------------------- download and checksum
        t0 = time.monotonic()
        downloaded = False
        if is_url:
            have = sh(f"test -f {shlex.quote(path)} && {algo}sum {shlex.quote(path)}")
            if not (have.ok and have.stdout.split()[:1] == [digest]):
                stage["writes"] = f"a partial download may be left at {path} (it resumes next time)"
                sh(f"mkdir -p {shlex.quote(download_dir)}")
                got = sh(f"curl -fL --retry 3 --retry-delay 2 -C - --progress-bar -o {shlex.quote(path)} "
                         f"{shlex.quote(args.runfile)}", timeout=args.timeout, what=f"downloading {name}")
                if not got.ok:
                    raise ToolError(f"download of {args.runfile} failed (curl exit {got.exit_code}): "
                                    f"{_last_line(got.stderr)}; a partial file at {path} resumes next time")
                downloaded = True
        timings["download"] = round(time.monotonic() - t0, 3)
        summed = sh(f"{algo}sum {shlex.quote(path)}", timeout=600, what="verifying the checksum")
        actual = summed.stdout.split()[0] if summed.ok and summed.stdout.split() else None
        if actual != digest:
            raise ToolError(f"checksum mismatch for {path}: expected {algo} {digest}, got {actual or 'no file'}. "
                            f"The file is corrupt or not the runfile meant; it was not run")

        # ---------------------------------------------------------- install
        t0 = time.monotonic()
        flags = ["--silent", "--toolkit", f"--toolkitpath={target}", "--no-man-page", f"--tmpdir={tmpdir}"]
        if args.override:
            flags.append("--override")
        if not args.toolkit_only:
            flags = [f for f in flags if not f.startswith(("--toolkit",))] + ["--driver", "--toolkit"]
        command = f"{sudo}sh {shlex.quote(path)} " + " ".join(shlex.quote(f) for f in flags)
        log_path = INSTALLER_LOG
        # The installer appends to its log: only the lines after these are this run's.
        counted = sh(f"test -f {shlex.quote(log_path)} && wc -l < {shlex.quote(log_path)} || echo 0")
        log_start = int(counted.stdout.strip()) if counted.stdout.strip().isdigit() else 0
        stage["writes"] = (f"{target} may be partly installed: check it and remove it before trying again "
                           f"(the installer's log is {INSTALLER_LOG})")
        run = sh(command, timeout=args.timeout, what="running the installer")
        stage["installed"] = True
        timings["install"] = round(time.monotonic() - t0, 3)
        log_text = _this_runs_log(sh, log_path, log_start)
        log_errors = [ln.strip() for ln in log_text.splitlines() if "[ERROR]" in ln or "ERROR:" in ln]
        summary = _summary(run.stdout)
        if not run.ok:
            left = self._what_failure_left(sh, args, target, cuda_link, link_before, sudo, path,
                                           downloaded=downloaded, is_url=is_url, download_dir=download_dir)
            raise ToolError(installer_failure(run, args.timeout, log_path, log_errors, f"{algo} {digest}", left))

        # ---------------------------------------------------------- verify
        nvcc = sh(f"{shlex.quote(target)}/bin/nvcc --version")
        nvcc_version = nvcc_build = None
        if nvcc.ok:
            mv = re.search(r"release (\d+\.\d+)", nvcc.stdout)
            mb = re.search(r"^Build (\S+)", nvcc.stdout, re.M)
            nvcc_version, nvcc_build = (mv.group(1) if mv else None), (mb.group(1) if mb else None)
        if nvcc_version != args.version:
            raise ToolError(f"the installer exited 0 but {target}/bin/nvcc reports {nvcc_version or 'nothing'} "
                            f"instead of {args.version}: {_last_line(nvcc.stdout + nvcc.stderr)}")
        link_after = _readlink(sh, cuda_link)
        if args.move_symlink:
            moved = sh(f"{sudo}ln -sfn {shlex.quote(target)} {shlex.quote(cuda_link)}", what="moving the cuda symlink")
            if not moved.ok:
                raise ToolError(f"toolkit installed, but moving {cuda_link} failed: {moved.stderr.strip()[:300]}")
            link_after = _readlink(sh, cuda_link)
        elif link_after != link_before and link_before is not None:
            # The installer moved it although we did not ask: put it back, and say so.
            sh(f"{sudo}ln -sfn {shlex.quote(link_before)} {shlex.quote(cuda_link)}")
            warnings.append(f"the installer pointed {cuda_link} at {link_after}; it was put back to {link_before}")
            link_after = _readlink(sh, cuda_link)
        removed = False
        if downloaded and _is_temporary(download_dir, tmpdir):
            gone = sh(f"rm -f -- {shlex.quote(path)}")  # downloaded as this user, so removed as this user
            removed = gone.ok
            if not gone.ok:
                warnings.append(f"the runfile downloaded to {path} could not be removed ({_last_line(gone.stderr)}); "
                                "remove it to free its space")
        return self.Result(version=args.version, runfile=path, downloaded=downloaded, runfile_removed=removed,
                           checksum=f"{algo}:{digest}",
                           checksum_ok=True, toolkit_path=target, nvcc_version=nvcc_version, nvcc_build=nvcc_build,
                           symlink_before=link_before, symlink_after=link_after, installer_command=command,
                           installer_summary=summary, log_errors=log_errors,
                           log_tail=truncate_for_model("\n".join(log_text.splitlines()[-20:]), 2000),
                           warnings=warnings, seconds=timings)

    @staticmethod
    def _what_failure_left(sh, args, target: str, cuda_link: str, link_before: str | None, sudo: str, path: str,
                           *, downloaded: bool, is_url: bool, download_dir: str) -> list[str]:
        """Sentences on the state a failed installer left: the symlink, the target, the runfile."""
        before = link_before or "nothing"
        link_after = _readlink(sh, cuda_link)
        if link_after == link_before:
            lines = [f"The symlink {cuda_link} pointed at {before} before and still does."]
        elif link_before is not None and not args.move_symlink:
            # The installer moved it although we did not ask: put it back, as after a success.
            sh(f"{sudo}ln -sfn {shlex.quote(link_before)} {shlex.quote(cuda_link)}")
            back = _readlink(sh, cuda_link)
            outcome = "it was put back" if back == link_before else \
                f"putting it back failed (it is {back or 'nothing'})"
            lines = [f"The symlink {cuda_link} pointed at {before} before; the installer pointed it at "
                     f"{link_after or 'nothing'}, and {outcome}."]
        else:
            lines = [f"The symlink {cuda_link} pointed at {before} before and points at {link_after or 'nothing'} now."]
        if sh(f"test -e {shlex.quote(target)} && echo exists || echo free").stdout.strip() == "exists":
            lines.append(f"{target} exists now: the installer may have left it partly installed; check it and remove "
                         f"it before trying again.")
        else:
            lines.append(f"{target} was not created.")
        if not is_url:
            lines.append(f"The runfile {path} was given as a path on the host and stays there.")
        elif not downloaded:
            lines.append(f"The runfile {path} was there before this call (its checksum matched) and stays there.")
        elif _is_temporary(download_dir, args.tmpdir):
            removed = sh(f"rm -f -- {shlex.quote(path)}")  # downloaded as this user, so removed as this user
            lines.append(f"The runfile this call downloaded to {path} was removed (a retry downloads it again)."
                         if removed.ok else f"The runfile this call downloaded to {path} could not be removed "
                                            f"({_last_line(removed.stderr)}); remove it to free its space.")
        else:
            lines.append(f"The runfile this call downloaded stays at {path} (download_dir is not a temporary "
                         f"directory).")
        return lines

    def _check_space(self, sh, args, path: str, is_url: bool, tmpdir: str, download_dir: str, target: str) -> None:
        """Refuse before anything is fetched when a mount lacks what the install will need there
        (tools/toolkit_sizes.py: the runfile's header, else the release's figures, else its size)."""
        size = self._runfile_size(sh, args.runfile, path, is_url)
        local = args.runfile[len("file://"):] if args.runfile.startswith("file://") else path
        header = sh(read_header_command(local)).stdout.encode()
        needs = needs_for(args.version, header_payload_bytes(header), size)
        if needs is None:
            return
        fetched_there = sh(f"test -f {shlex.quote(path)} && echo there").stdout.strip() == "there"
        places = install_places(needs, tmpdir, target)
        if is_url and not fetched_there and size:
            places.append((download_dir, size, "the runfile is downloaded there"))
        short = shortfalls([Place(where, need, why, *mount_and_free(sh, where)) for where, need, why in places])
        if short:
            raise ToolError(f"not enough space to install CUDA {args.version} on {args.host}: {'; '.join(short)} "
                            f"(figures: {needs.source}). Free space there, or choose another tmpdir or "
                            f"toolkit_path on a filesystem that has it; nothing was downloaded or written")

    @staticmethod
    def _runfile_size(sh, runfile: str, path: str, is_url: bool) -> int | None:
        if is_url and not runfile.startswith("file://"):
            head = sh(f"curl -fsIL {shlex.quote(runfile)}", timeout=60)
            sizes = re.findall(r"(?im)^content-length:\s*(\d+)", head.stdout)
            return int(sizes[-1]) if sizes else None
        local = runfile[len("file://"):] if runfile.startswith("file://") else path
        r = sh(f"stat -c %s {shlex.quote(local)}")
        return int(r.stdout.strip()) if r.ok and r.stdout.strip().isdigit() else None


def no_compiler(host: str) -> str:
    return (f"{host} has no gcc on PATH (`command -v gcc` finds none), and the CUDA installer stops without one "
            f"(\"Missing gcc. gcc is required to continue.\"): install a compiler on {host} first (Debian and "
            f"Ubuntu: apt-get install gcc), or install with `override: true`, which skips the installer's compiler "
            f"check and needs a rule of the goal file that allows it; nothing was written or downloaded")


def installer_failure(run, timeout: int, log_path: str, log_errors: list[str], checksum: str,
                      left: list[str]) -> str:
    """One paragraph: how the installer ended, what it and its log said, and what it left behind."""
    how = f"timed out after {timeout} s" if run.timed_out else f"exit {run.exit_code}"
    said = _last_line(run.stdout + "\n" + run.stderr)
    logged = [re.sub(r"^\[ERROR\]:\s*", "", e) for e in log_errors[-5:]]
    logged = [e for e in logged if e != said]
    parts = [f"the installer failed ({how}): {_sentence(said) if said != 'no output' else 'it printed nothing.'}",
             f"Its log {log_path} says: {' '.join(_sentence(e) for e in logged)}" if logged
             else f"Its log {log_path} has no error lines from this run.",
             f"The runfile's checksum matched ({checksum}) before it ran.", *left]
    return " ".join(parts)


def _sentence(text: str) -> str:
    """A message as one sentence: its own full stop, never a second one."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _resolves_to_itself(sh, paths: dict[str, str]) -> None:
    """Where the tool writes is where its arguments say, as the host resolves them: a symbolic link (or `..`)
    on the way would take a write allowed for /tmp/x into /usr/local/cuda-12.8/bin (a link planted in /tmp),
    past a rule that names /tmp/*. The gate matched the text; this checks it is the place. ToolError, one
    line per path, naming where it leads; nothing written."""
    names = list(paths)
    quoted = " ".join(shlex.quote(paths[n]) for n in names)
    resolved = sh(f"for p in {quoted}; do realpath -m -- \"$p\" || echo '?'; done")
    lines = resolved.stdout.splitlines()
    if not resolved.ok or len(lines) != len(names):
        raise ToolError(f"the paths {quoted} could not be resolved on the host ({_last_line(resolved.stderr)}); "
                        "nothing was written")
    moved = [f"{n} {paths[n]} leads to {where}" for n, where in zip(names, lines)
             if where != posixpath.normpath(paths[n]) or ".." in paths[n].split("/")]
    if moved:
        raise ToolError("a symbolic link (or `..`) on the way takes the install elsewhere than its arguments say: "
                        + "; ".join(moved) + ". Give the resolved path itself if that is where it should go (a rule "
                        "must then allow it); nothing was written")


def _is_temporary(directory: str, tmpdir: str) -> bool:
    d = posixpath.normpath(directory)
    return d == posixpath.normpath(tmpdir) or any(d == t or d.startswith(t + "/") for t in TEMPORARY_DIRS)


def _this_runs_log(sh, log_path: str, start: int) -> str:
    """The log lines the installer wrote in this run (the last 200), or the last 200 if it was rotated."""
    count = sh(f"wc -l < {shlex.quote(log_path)}")
    total = int(count.stdout.strip()) if count.ok and count.stdout.strip().isdigit() else 0
    since = f"tail -n +{start + 1} {shlex.quote(log_path)} | tail -n 200" if total >= start else \
        f"tail -n 200 {shlex.quote(log_path)}"
    log = sh(since)
    return log.stdout if log.ok else ""


def split_checksum(value: str) -> tuple[str | None, str]:
    v = value.strip().lower()
    algo, _, digest = v.rpartition(":")
    digest = digest.strip()
    if not re.fullmatch(r"[0-9a-f]+", digest):
        return None, digest
    by_len = {32: "md5", 64: "sha256"}.get(len(digest))
    if algo and algo != by_len:
        return None, digest
    return by_len, digest


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] or "/"


def _readlink(sh, link: str) -> str | None:
    r = sh(f"test -L {shlex.quote(link)} && readlink {shlex.quote(link)}")
    return r.stdout.strip() or None if r.ok else None


def _summary(stdout: str) -> str:
    """The installer's '= Summary =' block, as it printed it."""
    i = stdout.find("= Summary =")
    return stdout[max(0, stdout.rfind("\n", 0, max(0, i - 12)) + 1):].strip()[:2000] if i >= 0 else stdout.strip()[-800:]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"

