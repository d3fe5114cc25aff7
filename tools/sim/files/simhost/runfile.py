"""The CUDA runfile installer of the simulated host.

It accepts NVIDIA's flags, checks what the real installer checks (a terminal or --silent,
compiler, free space, a loaded kernel module when the driver is asked for), writes
/var/log/cuda-installer.log in the real one's line format, and installs a toolkit side by side.
Every path is a host path; anything outside the sim root is refused as a permission error, the
way an unprivileged install into / fails.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import machine
from . import state as host_state
from . import toolkit

# Flags that take a value (--flag=value) and plain switches, as NVIDIA documents them.
VALUE_FLAGS = ("--toolkitpath", "--installpath", "--tmpdir", "--defaultroot", "--librarypath",
               "--kernel-source-path", "--extract", "--samplespath", "--target")
SWITCHES = ("--silent", "--driver", "--toolkit", "--samples", "--no-man-page", "--override", "--no-drm",
            "--no-opengl-libs", "--kernelobjects", "--run-nvidia-xconfig", "--override-driver-check",
            "--no-nouveau-check", "--nox11", "--noexec", "--keep", "--quiet", "--accept", "--nochown")

MODULE_LOADED = (
    "ERROR: An NVIDIA kernel module 'nvidia' appears to already be loaded in your kernel.  This may be because "
    "it is in use (for example, by an X server, a CUDA program, or the NVIDIA Persistence Daemon), but this may "
    "also happen if your kernel was configured without support for module unloading.  Please be sure to exit any "
    "programs that may be using the GPU(s) before attempting to upgrade your driver.  If no GPU-based programs "
    "are running, you know that your kernel supports module unloading, and you still receive this message, then "
    "an error may have occurred that has corrupted an NVIDIA kernel module's usage count, for which the simplest "
    "remedy is to reboot your computer.")

EXIT_FAILED = 1
EXIT_ABORTED = 134  # what the shell reports for the real installer's uncaught boost exception


@dataclass
class Options:
    silent: bool = False
    driver: bool = False
    toolkit: bool = False
    override: bool = False
    no_man_page: bool = False
    no_drm: bool = False
    no_opengl_libs: bool = False
    paths: dict[str, str] = field(default_factory=dict)
    log_lines: list[str] = field(default_factory=list)  # "Setting ..." lines, in argument order
    help: bool = False


class _Refused(Exception):
    """The installer stops: message for stdout, exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED, stderr: bool = False):
        super().__init__(message)
        self.code = code
        self.stderr = stderr


def main(runfile: str, root_hint: str, release_key: str, argv: list[str]) -> int:
    release = toolkit.RELEASES[release_key]
    root = host_state.find_root(runfile) or host_state.find_root(os.getcwd()) or (
        Path(root_hint) if root_hint else None)
    if root is None:
        sys.stderr.write("this installer only runs inside a simulated GPU host\n")
        return EXIT_FAILED
    try:
        opts = parse(argv)
    except _Refused as e:
        sys.stdout.write(str(e))
        return e.code
    if opts.help:
        sys.stdout.write(help_text(Path(runfile).name, release))
        return 0
    installer = Installer(root, release, opts)
    try:
        installer.run()
    except _Refused as e:
        (sys.stderr if e.stderr else sys.stdout).write(str(e))
        sys.stdout.flush()
        return e.code
    return 0


def parse(argv: list[str]) -> Options:
    opts = Options()
    for arg in argv:
        if arg == "--":
            continue
        if arg in ("--help", "-h"):
            opts.help = True
            continue
        name, eq, value = arg.partition("=")
        if name in VALUE_FLAGS:
            if not eq or not value:
                raise _Refused(f"Option {name} needs a value: {name}=<path>\n")
            opts.paths[name.lstrip("-")] = value
            key = {"installpath": "globalpath", "defaultroot": "defaultpath", "librarypath": "defaultpath",
                   "extract": "extractPath"}.get(name.lstrip("-"), name.lstrip("-"))
            opts.log_lines.append(f"Setting {key}={value}")
            continue
        if arg not in SWITCHES:
            raise _Refused(f"Unknown option: {arg}\n")
        attr = arg.lstrip("-").replace("-", "_")
        if hasattr(opts, attr):
            setattr(opts, attr, True)
        if arg == "--no-man-page":
            opts.log_lines.append("Not installing manpages")
        elif arg in ("--silent", "--driver", "--toolkit", "--samples", "--override", "--kernelobjects"):
            opts.log_lines.append(f"Setting {arg.lstrip('-')}=true")
    return opts


class Installer:
    def __init__(self, root: Path, release: toolkit.Release, opts: Options):
        self.root = root
        self.release = release
        self.opts = opts
        self.state = host_state.load(root)
        self.log_path = host_state.host_path(root, "/var/log/cuda-installer.log")

    # ----------------------------------------------------------------- the steps, in the real order

    def run(self) -> None:
        self._require_interface()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for line in self.opts.log_lines:
            self.log(line)
        if not (self.opts.driver or self.opts.toolkit):
            # As root, --silent with no component selected means "everything": driver included.
            self.opts.driver = self.opts.toolkit = True
        if not self.state["driver"]["loaded"] and not self._driver_files_present():
            self.log("Driver not installed.")
        self._check_compiler()
        self.log("Initializing menu")
        self.log("nvidia-fs.setKOVersion(2.26.6)")
        self.log("Setup complete")
        toolkit_dir = self._toolkit_dir() if self.opts.toolkit else None
        tmp_dir = self._tmp_dir()
        self._check_space(tmp_dir, toolkit_dir)
        with self._extracted(tmp_dir):
            if self.opts.driver:
                self._install_driver()
            else:
                self.log("Silent install option: skipping driver")
            if toolkit_dir is not None:
                self._install_toolkit(toolkit_dir)

    def _require_interface(self) -> None:
        if self.opts.silent:
            return
        # Without --silent the real installer opens an ncurses interface on the terminal.
        if not sys.stdin.isatty() or os.environ.get("TERM", "dumb") in ("", "dumb"):
            raise _Refused("Error opening terminal: unknown.\n")
        raise _Refused("This simulated runfile has no interactive interface; run it with --silent and the "
                       "components to install (--toolkit, --driver).\n")

    def _check_compiler(self) -> None:
        self.log("Checking compiler version...")
        gcc = self.state.get("gcc")
        self.log(f"gcc location: {'/usr/bin/gcc' if gcc else ''}\n")
        if not gcc:
            self.log("Missing gcc. gcc is required to continue.", level="ERROR")
            if not self.opts.override:
                raise _Refused(f"Failed to verify gcc version. See log at {self.log_path} for details.\n")
            return
        self.log(f"gcc version: {gcc}\n")

    def _toolkit_dir(self) -> Path:
        path = self.opts.paths.get("toolkitpath") or self.opts.paths.get("installpath")
        if path is None:
            return host_state.host_path(self.root, f"/usr/local/cuda-{self.release.short}")
        return Path(os.path.abspath(path))

    def _tmp_dir(self) -> Path:
        path = self.opts.paths.get("tmpdir")
        if path is None:
            return host_state.host_path(self.root, "/tmp")
        return Path(os.path.abspath(path))

    def _check_space(self, tmp_dir: Path, toolkit_dir: Path | None) -> None:
        needs = [(tmp_dir, self.release.tmp_need_bytes)]
        if toolkit_dir is not None:
            needs.append((toolkit_dir, self.release.install_need_bytes))
        failures = []
        for path, need in needs:
            sys_path = host_state.system_path(self.root, path)
            if sys_path is None:
                continue  # refused as a permission error when the installer writes there
            mount, free_mb = host_state.free_space_mb(self.state, sys_path)
            if free_mb * 1024 * 1024 < need:
                shown = host_state.host_path(self.root, mount) if mount != "/" else self.root
                failures.append(f"Not enough space on parition mounted at {shown}.\nNeed {need} bytes.\n")
        if failures:
            for text in failures:
                self.log(text.replace("\n", " ").strip(), level="ERROR")
            self.log("Disk space check has failed. Installation cannot continue.", level="ERROR")
            raise _Refused("\n".join(failures) + "\nDisk space check has failed. Installation cannot continue.\n")

    def _extracted(self, tmp_dir: Path):
        """The real runfile unpacks itself into the temp dir first, and cleans up after."""
        installer = self

        class _Scratch:
            def __enter__(self):
                installer._writable(tmp_dir, "create_directory")
                tmp_dir.mkdir(parents=True, exist_ok=True)
                self.path = Path(tempfile.mkdtemp(prefix="cuda-installer-", dir=tmp_dir))
                (self.path / "builds").mkdir()
                return self.path

            def __exit__(self, *exc):
                shutil.rmtree(self.path, ignore_errors=True)
                return False

        return _Scratch()

    def _install_driver(self) -> None:
        r = self.release
        self.log("Installing: Driver")
        self.log(f"Installing: {r.driver}")
        flags = ["--ui=none", "--no-questions", "--accept-license", "--disable-nouveau", "--no-cc-version-check",
                 "--install-libglvnd"]
        if self.opts.no_drm:
            flags.append("--no-drm")
        if self.opts.no_opengl_libs:
            flags.append("--no-opengl-files")
        self.log(f"Executing NVIDIA-Linux-x86_64-{r.driver}.run {' '.join(flags)}  2>&1")
        nvidia_log = host_state.host_path(self.root, "/var/log/nvidia-installer.log")
        if self.state["driver"]["loaded"]:
            self._write_nvidia_installer_log(nvidia_log, flags, failed=True)
            self.log("Finished with code: 256")
            self.log(f"Install of driver component failed. Consult the driver log at {nvidia_log} for more details.",
                     level="ERROR")
            self.log(f"Install of {r.driver} failed, quitting", level="ERROR")
            raise _Refused(f"{MODULE_LOADED}\n\nInstallation failed. See log at {self.log_path} for details.\n")
        self._write_nvidia_installer_log(nvidia_log, flags, failed=False)

        def new_driver(st: dict) -> None:
            st["driver"].update(version=r.driver, cuda=machine.driver_cuda_version(r.driver), smi_version=r.driver,
                                loaded=True)

        self.state = host_state.update(self.root, new_driver)
        write_proc_version(self.root, self.state)
        self.log("Finished with code: 0")
        self.log(f"Installed: {r.driver}")

    def _install_toolkit(self, dest: Path) -> None:
        r = self.release
        self._writable(dest, "create_directories")
        man_dir = None if self.opts.no_man_page else host_state.host_path(self.root, "/usr/share/man")
        for component in toolkit.install(dest, r, self.state["python"], man_dir=man_dir):
            self.log(f"Installing: {component}")
        default_place = "toolkitpath" not in self.opts.paths and "installpath" not in self.opts.paths
        if default_place:
            # Installed in the default place, the toolkit also becomes /usr/local/cuda.
            link = host_state.host_path(self.root, "/usr/local/cuda")
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(dest)
            self.log(f"Creating symlink {host_state.host_path(self.root, '/usr/local/cuda')} -> {dest}")
        self.log(f"Installed: CUDA Toolkit {r.short}")

    # ----------------------------------------------------------------- helpers

    def _writable(self, path: Path, operation: str) -> None:
        """Refuse a path outside the sim root, or on a read-only filesystem, the way boost::filesystem
        reports it (the real installer aborts with this message)."""
        existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        if host_state.system_path(self.root, path) is None:
            message = f'boost::filesystem::{operation}: Permission denied: "{path}"'
        elif not os.access(existing, os.W_OK) or _read_only(existing):
            message = f'boost::filesystem::{operation}: Read-only file system: "{path}"'
        else:
            message = None
        if message is not None:
            self.log(message, level="ERROR")
            raise _Refused("terminate called after throwing an instance of 'boost::filesystem::filesystem_error'\n"
                           f"  what():  {message}\n", code=EXIT_ABORTED, stderr=True)

    def _driver_files_present(self) -> bool:
        return host_state.host_path(self.root, "/proc/driver/nvidia/version").exists()

    def log(self, message: str, level: str = "INFO") -> None:
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"[{level}]: {message}\n")

    def _write_nvidia_installer_log(self, path: Path, flags: list[str], failed: bool) -> None:
        r = self.release
        lines = [f"nvidia-installer log file '{path}'",
                 f"creation time: {time.asctime()}",
                 f"installer version: {r.driver}", "",
                 f"PATH: {os.environ.get('PATH', '')}", "",
                 "nvidia-installer command line:", "    ./nvidia-installer",
                 *[f"    {f}" for f in flags], "",
                 "Using built-in stream user interface",
                 f"-> Detected {os.cpu_count() or 1} CPUs online; setting concurrency level to {os.cpu_count() or 1}."]
        if failed:
            lines += [MODULE_LOADED,
                      f"ERROR: Installation has failed.  Please see the file '{path}' for details.  You may find "
                      "suggestions on fixing installation problems in the README available on the Linux driver "
                      "download page at www.nvidia.com."]
        else:
            lines += ["-> Installing NVIDIA driver version " + r.driver + ".",
                      "-> Kernel module compilation complete.",
                      "-> Installation of the kernel module for the NVIDIA Accelerated Graphics Driver for Linux-x86_64 "
                      f"(version {r.driver}) is now complete."]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def write_proc_version(root: Path, st: dict) -> None:
    """/proc/driver/nvidia/version: where people look for the loaded kernel module's version."""
    path = host_state.host_path(root, "/proc/driver/nvidia/version")
    drv = st["driver"]
    if not drv["loaded"]:
        if path.exists():
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    flavour = "Open Kernel Module" if drv.get("open_kernel_module", True) else "Kernel Module"
    gcc = (st.get("gcc") or "gcc version 13.3.0").strip()
    path.write_text(f"NVRM version: NVIDIA UNIX {flavour} for x86_64  {drv['version']}  Release Build  "
                    f"(dvs-builder@U22-I3-B17-02-5)  Tue Nov 25 18:07:04 UTC 2025\nGCC version:  {gcc}\n")


def help_text(name: str, r: toolkit.Release) -> str:
    return f"""Usage: sh {name} [options]

Installs the NVIDIA CUDA Toolkit {r.version} and the NVIDIA driver {r.driver}.

  --silent                 Install with no further user input and minimal output; required for
                           any unattended install. At least one of --driver and --toolkit is
                           expected; as root, --silent alone installs both.
  --driver                 Install the NVIDIA driver ({r.driver}).
  --toolkit                Install the CUDA Toolkit {r.short}.
  --toolkitpath=<path>     Install the toolkit in <path> (default /usr/local/cuda-{r.short}); the
                           /usr/local/cuda symlink is only updated for the default path.
  --installpath=<path>     Install everything under <path>; the /usr/local/cuda symlink is not created.
  --defaultroot=<path>     Install libraries to <path>.
  --tmpdir=<path>          Extract into <path> instead of /tmp.
  --no-man-page            Do not install the man pages under /usr/share/man.
  --override               Ignore compiler, third-party library and toolkit detection checks.
  --no-drm                 Do not install the nvidia-drm kernel module (driver only).
  --no-opengl-libs         Do not install the NVIDIA OpenGL libraries (driver only).
  --kernel-source-path=<path>  Kernel sources to build the driver against.
  --help                   Print this help and exit.

The installer log is written to /var/log/cuda-installer.log.
"""
