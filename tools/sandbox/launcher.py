"""The read sandbox's host side: shipped with each auto-run command and run by the host's own python3.

    python3 -I -S -c SOURCE POLICY -- bash --noprofile --norc -c COMMAND

POLICY is `key=value` pairs joined by `;` (mechanism, timeout_s, max_output, scratch_mb, ports as 80,8000):
json, socket and threading cost more to import than the rest of the sandbox takes to set up.
    python3 -I -S -c SOURCE --probe

Standard library only and Python 3.6 syntax: it must run on any stock Ubuntu or RHEL GPU host as it is.
It never runs the command without the sandbox: a step that fails stops with exit 126 and a line on stderr.

Mechanisms, chosen by what the host allows (the first that works):

  namespaces (root with CAP_SYS_ADMIN): a mount namespace in which every mount is read-only, nodev and
      nosuid; a /dev of its own with only null, zero, full, random, urandom, tty, the fd links and the
      GPU's nodes; a size-limited scratch tmpfs at /dev/shm (TMPDIR); then the command runs as a uid of
      its own with no capability but CAP_DAC_READ_SEARCH (it reads every file, and owns nothing: it can
      signal, trace or renice no process of the host, and a daemon sees a uid with no rights). Where the
      classifier allowed a loopback read, a network namespace of its own whose loopback ports are relayed
      to the host's 127.0.0.1 only.
  landlock (anyone, kernel 5.13+): Landlock allows reading everywhere but /dev, the listed device nodes,
      and writing only to a private scratch directory; the kernel resolves every path (symlinks, ..,
      /proc/PID/root) before it checks.

Both add no_new_privs and a seccomp filter: no new namespaces, mounts, modules, kexec, bpf, perf,
io_uring, keyrings, ptrace or handle-based opens, and sockets only of the families the policy allows
(netlink always: ss and ip read through it; no IP socket outside a private network namespace).
The supervisor bounds wall-clock time and output, and kills what the command left behind.
"""

import ctypes
import errno
import os
import resource
import select
import signal
import struct
import sys
import time

STATUS = "upgrade-agent-sandbox: "
NOTHING_LISTENS = "nothing listens on the host's 127.0.0.1 at port"  # (host.py reads this line)
SANDBOX_UID = 1999999999  # a uid no host account uses: the command owns nothing of the host
READER_PROCESSES = 2048  # processes of that uid at once, every read of a session together
READ_OPEN_FILES = 1024  # each process of a read: the soft limit most distributions give every process
EXIT_SETUP, EXIT_TIME, EXIT_OUTPUT, EXIT_CANCELLED = 126, 124, 125, 130

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

# mount(2) flags
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MS_REMOUNT, MS_BIND, MS_REC, MS_SLAVE = 32, 4096, 16384, 1 << 19
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUSER = 0x20000, 0x40000000, 0x08000000, 0x10000000

PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 8, 22, 24
PR_SET_SECUREBITS, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 28, 36, 38, 47
PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 2, 4
CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN, CAP_SETFCAP = 2, 21, 31
# SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | ..._LOCKED | SECBIT_KEEP_CAPS_LOCKED
SECUREBITS = 0x1 | 0x2 | 0x4 | 0x8 | 0x20

# Devices a read may open: harmless ones, and the GPU's (nvidia-smi, NVML, CUDA need them).
PLAIN_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def gpu_devices():
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    keep = []
    for name in sorted(names):
        if name == "nvidiactl" or name.startswith("nvidia-uvm") or (name.startswith("nvidia") and name[6:].isdigit()):
            keep.append(name)
    return keep


class SetupError(Exception):
    pass


def check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise SetupError("%s: %s" % (what, os.strerror(e)))
    return ret


# In a server's request (see serve), the supervisor's output goes to the server framed: (frames fd, request id).
OUT = None
FRAME = struct.Struct("!cII")  # kind, request id, length of the data that follows
FRAME_DATA = 4096 - FRAME.size  # a frame is written whole: a pipe writes up to PIPE_BUF (4096) bytes at once
CANCELLED = []  # set by SIGUSR1 in a server's request: the server was told to stop it
STDERR_MID_LINE = False  # the command's stderr so far ends without a newline (each read is a process of its own)


def emit(stream, data):
    """The command's output (stream 1 or 2), or the launcher's own lines, to whoever started the launcher."""
    global STDERR_MID_LINE
    if stream == 2 and data:
        STDERR_MID_LINE = not data.endswith(b"\n")
    if OUT is None:
        os.write(stream, data)
        return
    fd, rid = OUT
    kind = b"O" if stream == 1 else b"E"
    for i in range(0, len(data), FRAME_DATA):
        piece = data[i:i + FRAME_DATA]
        os.write(fd, FRAME.pack(kind, rid, len(piece)) + piece)


def status(message, fd=None):
    """A line of the launcher's own on stderr (or on `fd`, the command's stderr, in the child)."""
    line = (STATUS + message + "\n").encode()
    try:
        if fd is None:
            # on a line of its own, though the command's stderr was cut mid-line: it is read by its start
            emit(2, b"\n" + line if STDERR_MID_LINE else line)
        else:
            os.write(fd, line)
    except OSError:
        pass


# ---- seccomp ---------------------------------------------------------------------------------------------------

ARCH = os.uname().machine
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name: (x86_64, aarch64); None where the architecture has no such call.
SYSCALLS = {
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "bpf": (321, 280), "perf_event_open": (298, 241),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264), "ptrace": (101, 117), "process_vm_writev": (311, 271),
    "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225), "settimeofday": (164, 170),
    "clock_settime": (227, 112), "clock_adjtime": (305, 266), "adjtimex": (159, 171),
    "sethostname": (170, 161), "setdomainname": (171, 162), "iopl": (172, None), "ioperm": (173, None),
    "acct": (163, 89), "quotactl": (179, 60), "mknod": (133, None), "mknodat": (259, 33),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "move_mount": (429, 429),
    "open_tree": (428, 428), "mount_setattr": (442, 442), "userfaultfd": (323, 282), "vhangup": (153, 58),
    "syslog": (103, 116), "fanotify_init": (300, 262), "migrate_pages": (256, 238), "move_pages": (279, 239),
    "process_madvise": (440, 440), "uselib": (134, None), "lookup_dcookie": (212, 18),
    # A read is one session (the launcher's setsid, before this filter): a new one would leave the kill of its
    # session and, where the kernel groups sessions for its scheduler, take a CPU share of its own each time
    # (64 sessions that spin: 64 shares against the host's one). Daemonizing is no read.
    "setsid": (112, 157),
    # Linux AIO contexts count against fs.aio-max-nr, one pool for the whole host that no descriptor bound covers:
    # four contexts of one read took all 65,536 events, and every database's or qemu's io_setup failed meanwhile.
    "io_setup": (206, 0),
}
# Calls refused in every mode.
DENIED = [name for name in SYSCALLS]
# Calls that change a file's metadata: refused where the command runs as the host's own uid (Landlock does not
# cover them); in the namespace mode the read-only mounts and the foreign uid refuse them already.
METADATA = {
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7), "removexattr": (197, 14),
    "lremovexattr": (198, 15), "fremovexattr": (199, 16), "utime": (132, None), "utimes": (235, None),
    "utimensat": (280, 88), "futimesat": (261, None),
}
# SysV and POSIX IPC objects: refused where the command runs in the host's IPC namespace (Landlock), where
# a segment it made would outlive it (the namespace mode gives each read an IPC namespace of its own).
IPC_OBJECTS = {"shmget": (29, 194), "semget": (64, 190), "msgget": (68, 186), "mq_open": (240, 180)}
# Calls allowed only on the caller itself (first argument 0) where the command runs as the host's own uid:
# renicing, pinning or re-limiting another process of the same user changes it.
SELF_ONLY = {
    "setpriority": ((141, 140), 1), "sched_setaffinity": ((203, 122), 0), "ioprio_set": ((251, 30), 1),
    "sched_setscheduler": ((144, 119), 0), "sched_setparam": ((142, 118), 0), "sched_setattr": ((314, 274), 0),
}
# prlimit64(pid, resource, new, old): reading any process's limits is a read; setting them is allowed only on the
# caller (pid 0), since a command of the same uid could otherwise lower another's (--cpu=1:1 kills it).
PRLIMIT64 = (302, 261)
SOCKET = (41, 198)
CLONE = (56, 220)
CLONE3 = (435, 435)
CLONE_NEW_MASK = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16

BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K, BPF_ALU_AND_K = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000


def bpf(code, k, jt=0, jf=0):
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(families, same_uid):
    """The filter: refuse what no read needs. `families`: socket families allowed."""
    index = 0 if ARCH == "x86_64" else 1
    if ARCH not in AUDIT_ARCH:
        raise SetupError("no seccomp table for the %s architecture" % ARCH)
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog = [bpf(BPF_LD_W_ABS, 4), bpf(BPF_JEQ_K, AUDIT_ARCH[ARCH], 1, 0), bpf(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
            bpf(BPF_LD_W_ABS, 0)]
    if ARCH == "x86_64":  # the x32 ABI numbers every call again from 0x40000000: none of it
        prog += [bpf(BPF_JGE_K, 0x40000000, 0, 1), bpf(BPF_RET_K, eperm)]
    denied = [SYSCALLS[n][index] for n in DENIED]
    if same_uid:
        denied += [METADATA[n][index] for n in METADATA] + [IPC_OBJECTS[n][index] for n in IPC_OBJECTS]
    for nr in denied:
        if nr is not None:
            prog += [bpf(BPF_JEQ_K, nr, 0, 1), bpf(BPF_RET_K, eperm)]
    prog += [bpf(BPF_JEQ_K, CLONE3[index], 0, 1), bpf(BPF_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    # clone: no new namespace (libc then cannot fall back to clone3's flags either)
    prog += [bpf(BPF_JEQ_K, CLONE[index], 0, 4), bpf(BPF_LD_W_ABS, 16), bpf(BPF_JSET_K, CLONE_NEW_MASK, 0, 1),
             bpf(BPF_RET_K, eperm), bpf(BPF_RET_K, SECCOMP_RET_ALLOW)]
    if same_uid:
        for name, (numbers, argi) in SELF_ONLY.items():
            nr = numbers[index]
            # nr? then load the argument: 0 is "this process", allowed; anything else refused
            prog += [bpf(BPF_JEQ_K, nr, 0, 4), bpf(BPF_LD_W_ABS, 16 + 8 * argi), bpf(BPF_JEQ_K, 0, 0, 1),
                     bpf(BPF_RET_K, SECCOMP_RET_ALLOW), bpf(BPF_RET_K, eperm)]
    # prlimit64: pid 0 (the caller), or no new limit (a NULL pointer: both halves of the argument zero)
    # (a jump's offset counts the instructions it skips)
    prog += [bpf(BPF_JEQ_K, PRLIMIT64[index], 0, 8),
             bpf(BPF_LD_W_ABS, 16), bpf(BPF_JEQ_K, 0, 5, 0),  # pid 0: allowed
             bpf(BPF_LD_W_ABS, 32), bpf(BPF_JEQ_K, 0, 0, 2),  # new, low half not 0: refused
             bpf(BPF_LD_W_ABS, 36), bpf(BPF_JEQ_K, 0, 1, 0),  # new, high half 0 too: a NULL, allowed
             bpf(BPF_RET_K, eperm), bpf(BPF_RET_K, SECCOMP_RET_ALLOW)]
    # socket(domain, type, ...): only the families allowed; IP sockets only for TCP (no UDP: no DNS, no egress)
    eacces = SECCOMP_RET_ERRNO | errno.EACCES
    checks = [bpf(BPF_LD_W_ABS, 16)]
    plain = [f for f in families if f not in (AF_INET, AF_INET6)]
    ip = [f for f in families if f in (AF_INET, AF_INET6)]
    for fam in plain:
        checks += [bpf(BPF_JEQ_K, fam, 0, 1), bpf(BPF_RET_K, SECCOMP_RET_ALLOW)]
    for i, fam in enumerate(ip):
        # jump over the remaining IP tests and the refusal to the type check
        checks.append(bpf(BPF_JEQ_K, fam, len(ip) - i, 0))
    checks.append(bpf(BPF_RET_K, eacces))
    if ip:
        checks += [bpf(BPF_LD_W_ABS, 24), bpf(BPF_ALU_AND_K, 0xF), bpf(BPF_JEQ_K, 1, 0, 1),  # SOCK_STREAM
                   bpf(BPF_RET_K, SECCOMP_RET_ALLOW), bpf(BPF_RET_K, eacces)]
    prog += [bpf(BPF_JEQ_K, SOCKET[index], 0, len(checks))] + checks
    prog.append(bpf(BPF_RET_K, SECCOMP_RET_ALLOW))
    return prog


PROGRAMS = {}  # a server's reads share their filters: (families, same_uid) -> program


def install_seccomp(families, same_uid):
    key = (tuple(families), same_uid)
    prog = PROGRAMS.get(key) or PROGRAMS.setdefault(key, seccomp_program(families, same_uid))
    if len(prog) > 4096:
        raise SetupError("seccomp program too long")
    buf = ctypes.create_string_buffer(b"".join(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0), "seccomp")


# ---- Landlock --------------------------------------------------------------------------------------------------

LL_CREATE, LL_ADD, LL_RESTRICT = 444, 445, 446
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_IOCTL_DEV = 1 << 15
LL_NET_BIND, LL_NET_CONNECT = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2


def landlock_abi():
    abi = libc.syscall(LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return abi if abi > 0 else 0


def fs_mask(abi):
    mask = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        mask |= 1 << 13  # refer
    if abi >= 3:
        mask |= 1 << 14  # truncate
    if abi >= 5:
        mask |= LL_IOCTL_DEV
    return mask


def stat_is_dir(fd):
    import stat as st
    return st.S_ISDIR(os.fstat(fd).st_mode)


def landlock_restrict(abi, scratch, ports, writable=()):
    handled = fs_mask(abi)
    net = (LL_NET_BIND | LL_NET_CONNECT) if abi >= 4 else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buf = ctypes.create_string_buffer(attr[:size])
    rs = check(libc.syscall(LL_CREATE, buf, ctypes.c_size_t(size), ctypes.c_uint32(0)), "landlock ruleset")
    read = (LL_EXECUTE | LL_READ_FILE | LL_READ_DIR) & handled

    def allow(path, access):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not stat_is_dir(fd):  # a file takes only the rights that apply to files
                access &= LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | (1 << 14) | LL_IOCTL_DEV
            rule = ctypes.create_string_buffer(struct.pack("=Qi", access & handled, fd))
            check(libc.syscall(LL_ADD, ctypes.c_int(rs), ctypes.c_int(1), rule, ctypes.c_uint32(0)),
                  "landlock rule for " + path)
        finally:
            os.close(fd)

    for entry in sorted(os.listdir("/")):
        if entry != "dev":
            allow("/" + entry, read)
    allow("/dev", LL_READ_DIR)
    node = LL_READ_FILE | LL_WRITE_FILE | LL_IOCTL_DEV
    for name in PLAIN_DEVICES + tuple(gpu_devices()):
        if os.path.exists("/dev/" + name):
            allow("/dev/" + name, node)
    for path in (scratch,) + tuple(writable):
        allow(path, handled & ~LL_EXECUTE & ~LL_IOCTL_DEV | LL_READ_FILE | LL_READ_DIR)
    if net:
        for port in ports:
            rule = ctypes.create_string_buffer(struct.pack("=QQ", LL_NET_CONNECT, port))
            check(libc.syscall(LL_ADD, ctypes.c_int(rs), ctypes.c_int(2), rule, ctypes.c_uint32(0)),
                  "landlock port rule")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.syscall(LL_RESTRICT, ctypes.c_int(rs), ctypes.c_uint32(0)), "landlock restrict")
    os.close(rs)
    return {"signals_confined": bool(scoped), "tcp_ports_only": bool(net)}


def landlock_scope():
    """Where the kernel has Landlock's scopes (ABI 6), the namespace mode's read may neither connect to an
    abstract unix socket nor signal a process made outside it: a read that names no port shares the host's
    network, whose abstract sockets (a container shim's, say) answer any uid. Files are left to the mounts
    (a rule on them would refuse `> /dev/stderr`, a pipe reopened through /proc)."""
    if landlock_abi() < 6:
        return
    attr = ctypes.create_string_buffer(struct.pack("QQQ", 0, 0, LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL))
    rs = check(libc.syscall(LL_CREATE, attr, ctypes.c_size_t(24), ctypes.c_uint32(0)), "landlock scope")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.syscall(LL_RESTRICT, ctypes.c_int(rs), ctypes.c_uint32(0)), "landlock restrict")
    os.close(rs)


# ---- namespaces ------------------------------------------------------------------------------------------------

def has_cap(cap):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> cap & 1)
    except OSError:
        pass
    return False


def mount(src, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if isinstance(s, str) else s  # noqa: E731
    check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), "mount %s" % target)


def unescape(field):
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points():
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            points.append((unescape(fields[4]), fields[5].split(",")))
    return points


KEEP = {"noexec": MS_NOEXEC, "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


# /proc stays writable where it concerns the command's own processes: CUDA's driver writes there when it
# starts, and the foreign uid may write nothing of another process (the kernel's ptrace and owner checks).
# What belongs to the whole machine under it is read-only, as in container runtimes.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/driver",
                  "/proc/acpi", "/proc/scsi", "/proc/timer_list", "/proc/kcore")


def make_read_only(skip):
    """Every mount read-only, nodev and nosuid, keeping the flags a remount may not clear (but /proc, above)."""
    for point, options in mount_points():
        if point == skip or point.startswith(skip + "/") or point == "/proc":
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
        for opt in options:
            flags |= KEEP.get(opt, 0)
        if libc.mount(None, point.encode(), None, flags, None) < 0:
            e = ctypes.get_errno()
            if e in (errno.ENOENT, errno.EACCES, errno.ENOTDIR):
                continue  # a mount point hidden under another mount, or gone: not reachable by path either
            raise SetupError("read-only remount of %s: %s" % (point, os.strerror(e)))
    mount(None, "/proc", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in PROC_READ_ONLY:
        if not os.path.exists(path):
            continue
        mount(path, path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


# Sockets of daemons that act for anyone who connects, whatever the uid: the journal writes what it is sent
# to the host's disk, and the resolver and nscd send any name asked of them out to the DNS. Hidden from
# reads under an empty tmpfs (journalctl reads the journal's files, which stay; names resolve from /etc/hosts).
SCRATCH_INODES = 16384  # files in a read's scratch: each costs the kernel memory its size limit does not count
HIDDEN_SOCKET_DIRS = ("/run/systemd/journal", "/run/systemd/resolve", "/run/nscd", "/var/run/nscd")


def prepare_namespace():
    """What every read shares: a mount namespace of its own in which every mount but /dev (each read builds
    its own, below) is read-only, nodev and nosuid, and the sockets above hidden. Its mounts are slaves of
    the host's: a file system the host mounts or unmounts later is seen so, and none is kept busy by it."""
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    mount(None, "/", None, MS_REC | MS_SLAVE)
    make_read_only("/dev")
    for path in HIDDEN_SOCKET_DIRS:
        if os.path.isdir(path) and not os.path.islink(path):
            mount("hidden", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=4k")


# Where a read's /dev is built, in its own copy of the namespace: a directory of the host's /dev that the
# new /dev then covers, so that no path leads back to the host's nodes.
STAGE_PLACES = ("/dev/shm", "/dev/pts", "/dev/mqueue", "/dev/hugepages")


def enter_read_namespace(scratch_mb, new_net):
    """One read's copy of the prepared namespace: a /dev with only the harmless nodes and the GPU's, a
    size-limited scratch tmpfs at /dev/shm (and a bound on its files), IPC of its own, and a network of its
    own where loopback ports are relayed. A read that names none stays in the host's network, whose
    sockets `ss` and `ip` show; Landlock's scope (where the kernel has it) keeps it from the abstract
    unix sockets there, which answer any uid that connects."""
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if new_net else 0)), "unshare")
    stage = next((place for place in STAGE_PLACES if os.path.isdir(place)), None)
    if stage is None:
        raise SetupError("the host's /dev has none of %s to build the sandbox's /dev in" % ", ".join(STAGE_PLACES))
    mount("sandbox", stage, "tmpfs", MS_NOSUID, "mode=700,size=1m")
    dev = stage + "/dev"
    os.mkdir(dev, 0o755)
    for name in PLAIN_DEVICES + tuple(gpu_devices()):
        if os.path.exists("/dev/" + name):
            open(dev + "/" + name, "w").close()
            mount("/dev/" + name, dev + "/" + name, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, dev + "/" + name)
    os.mkdir(dev + "/shm", 0o1777)
    os.mkdir(dev + "/pts", 0o755)
    mount(dev, "/dev", None, MS_BIND | MS_REC)
    mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    mount("scratch", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
          "mode=1777,size=%dm,nr_inodes=%d" % (scratch_mb, SCRATCH_INODES))
    if new_net:
        bring_loopback_up()


def drop_to_reader():
    """The command's identity: a uid of its own, CAP_DAC_READ_SEARCH alone, and no way back."""
    for cap in range(64):
        if cap != CAP_DAC_READ_SEARCH and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0:
            if ctypes.get_errno() != errno.EINVAL:
                raise SetupError("drop capability %d: %s" % (cap, os.strerror(ctypes.get_errno())))
    # Before the uid changes: with NO_SETUID_FIXUP the change keeps the capabilities, which capset then lowers.
    check(libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "securebits")
    os.setgroups([])
    os.setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
    bit = 1 << CAP_DAC_READ_SEARCH
    header = struct.pack("Ii", 0x20080522, 0)
    data = struct.pack("IIIIII", bit, bit, bit, 0, 0, 0)  # effective, permitted, inheritable (x2 for caps 32-63)
    capset = {"x86_64": 126, "aarch64": 91}[ARCH]
    check(libc.syscall(capset, ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)), "capset")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0), "ambient capability")


def drop_every_capability():
    """Root without the rights to change its uid (no CAP_SETUID or CAP_SETPCAP): keep the uid, lose every
    capability (lowering them needs no right). Processes of the same uid stay reachable: seccomp's
    self-only rules cover what would change them."""
    header = struct.pack("Ii", 0x20080522, 0)
    capset = {"x86_64": 126, "aarch64": 91}[ARCH]
    check(libc.syscall(capset, ctypes.create_string_buffer(header), ctypes.create_string_buffer(bytes(24))), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def landlock_identity(scratch):
    """Root in the Landlock mode (a container without CAP_SYS_ADMIN, say) would keep its capabilities: setting
    links down, reading /proc/kmsg, re-limiting any process. It becomes the reader uid of the namespace mode,
    or, failing that, root with no capability. Anyone else has none to lose. True: it is the reader now."""
    if os.geteuid() != 0:
        return False
    try:
        os.chown(scratch, SANDBOX_UID, SANDBOX_UID)
        drop_to_reader()
        return True
    except (SetupError, OSError):
        bound_alone()
        drop_every_capability()
        return False


# ---- the loopback relay (namespace mode) -----------------------------------------------------------------------

def send_fd(sock, fd):
    import socket
    sock.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])


def recv_fd(sock):
    import socket
    msg, anc, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            return struct.unpack("i", data[:4])[0]
    return -1


def pump(a, b):
    import socket
    import threading
    def one_way(src, dst):
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (dst,):
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    t = threading.Thread(target=one_way, args=(b, a), daemon=True)
    t.start()
    one_way(a, b)
    t.join()
    a.close()
    b.close()


def serve_inside(listeners, channel, lock):
    """In the sandbox's network namespace: each connection to a relayed port is paired with one the
    supervisor opened to the same port on the host's 127.0.0.1."""
    import socket
    import threading
    by_fd = {l.fileno(): (l, port) for l, port in listeners}
    while True:
        ready, _, _ = select.select(list(by_fd), [], [])
        for fd in ready:
            listener, port = by_fd[fd]
            conn, _ = listener.accept()
            with lock:
                channel.sendall(struct.pack("H", port))
                outside = recv_fd(channel)
            if outside < 0:
                conn.close()
                continue
            other = socket.socket(fileno=outside)
            threading.Thread(target=pump, args=(conn, other), daemon=True).start()


def serve_outside(channel):
    """On the host: open a connection to 127.0.0.1:PORT for each request; nothing else is reachable."""
    import socket
    while True:
        try:
            data = channel.recv(2)
        except OSError:
            return
        if len(data) < 2:
            return
        (port,) = struct.unpack("H", data)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            s.settimeout(None)
            send_fd(channel, s.fileno())
        except OSError:
            try:
                channel.sendmsg([b"x"])
            except OSError:
                return
        finally:
            s.close()


def bring_loopback_up():
    import fcntl
    import socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifreq = struct.pack("16sH14s", b"lo", 0x1 | 0x40, b"")  # IFF_UP | IFF_RUNNING
    fcntl.ioctl(sock.fileno(), 0x8914, ifreq)  # SIOCSIFFLAGS
    sock.close()


def private_network():
    """The Landlock mode's network namespace of its own, in a user namespace that maps the caller's uid to
    itself: then only the relayed loopback ports are reachable, on no other address (Landlock's port rules
    name ports, not addresses). False where the host refuses unprivileged user namespaces: the port rules
    alone stand then. Not for root become the reader: in a user namespace it would lose the right to read
    every file, which is what its reads need."""
    if not enter_user_namespace(CLONE_NEWNET):
        return False
    bring_loopback_up()
    return True


def enter_user_namespace(more_flags):
    """A user namespace of its own (with `more_flags`' other namespaces) that maps this process's uid and gid
    to themselves. False where the host refuses it."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | more_flags) < 0:
        return False
    for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (gid, gid))):
        with open("/proc/self/" + name, "w") as f:
            f.write(text)
    return True


def listening_ports(ports):
    """The ports of `ports` something listens on at the host's 127.0.0.1 (bound to it, or to every address),
    read from the host's own tables: only those are relayed, so that a port nothing listens on refuses the
    read's connection as it would outside (a relay that accepted it would have to reset it instead, which
    reads as a server that is up but broken)."""
    found = set()
    # The tables' addresses are the kernel's words in hex: 127.0.0.1 is 0100007F; the relay connects there,
    # which a listener on it, on every IPv4 address, or on every IPv6 one (dual-stack) answers.
    for table, reached in (("/proc/net/tcp", ("0100007F", "00000000")),
                           ("/proc/net/tcp6", ("00000000000000000000000000000000",
                                               "0000000000000000FFFF00000100007F"))):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    address, port = fields[1].split(":")
                    if fields[3] == "0A" and address in reached:  # 0A: LISTEN
                        found.add(int(port, 16))
        except (OSError, ValueError, IndexError):
            return list(ports)  # unreadable: relay them all, as before
    return [p for p in ports if p in found]


def start_relay(ports, channel, out_w, err_w):
    """In the command's network namespace: listen on each relayed port of its loopback, then fork. The parent
    stays behind as the relay, running only this code, until the command ends; the child returns."""
    import socket
    import threading
    listeners = []
    for port in ports:
        for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                listener = socket.socket(family, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((addr, port))
                listener.listen(16)
                listeners.append((listener, port))
            except OSError:
                pass
    pid = os.fork()
    if pid:
        if listeners:
            threading.Thread(target=serve_inside, args=(listeners, channel, threading.Lock()), daemon=True).start()
        os.close(out_w)  # the command's output reaches the supervisor from the command alone
        os.close(err_w)
        os.dup2(os.open("/dev/null", os.O_RDWR), 0)
        _, code = os.waitpid(pid, 0)
        os._exit(os.WEXITSTATUS(code) if os.WIFEXITED(code) else 128 + os.WTERMSIG(code))
    for listener, _ in listeners:
        listener.close()
    channel.close()


# ---- the command and its supervisor ----------------------------------------------------------------------------

def probe():
    abi = landlock_abi()
    euid = os.geteuid()
    if ARCH not in AUDIT_ARCH:
        abi = 0  # without a seccomp table there is no sandbox worth the name
    if euid == 0 and has_cap(CAP_SYS_ADMIN):
        mechanism = "namespaces"
    elif abi:
        mechanism = "landlock"
    else:
        mechanism = "none"
    return {"mechanism": mechanism, "landlock_abi": abi, "uid": euid, "kernel": os.uname().release,
            "arch": ARCH, "python": "%d.%d" % sys.version_info[:2], "seccomp": ARCH in AUDIT_ARCH}


def bound_the_command():
    """What a read may not spend of the host: no core file (a crash would have the kernel's core handler, as
    root outside every namespace, write one), the first place in the OOM killer's line (a read that
    eats memory is killed before the host's own work), and READ_OPEN_FILES open files: a socket's or a
    pipe's buffers are kernel memory no memory count of the process holds and the OOM killer does not see, so
    their number is what bounds them (ten thousand stuffed socket pairs held 2 GB). Before any change of uid,
    which would take the process's /proc files away from it; the command cannot raise the bound again
    (no capability is left it)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = READ_OPEN_FILES if hard == resource.RLIM_INFINITY else min(READ_OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def bound_the_reader():
    """The reader uid's processes at once: its count covers every read of the session (a user's own uid
    counts that user's other processes too: see bound_alone)."""
    resource.setrlimit(resource.RLIMIT_NPROC, (READER_PROCESSES, READER_PROCESSES))


def maps_one_uid():
    """Whether this process's user namespace maps a single uid (a rootless container, `unshare -r`, the
    Landlock mode's private network): every other uid already reads as nobody here."""
    try:
        with open("/proc/self/uid_map") as f:
            lines = f.read().split()
    except OSError:
        return False
    return len(lines) == 3 and lines[2] == "1"


def kernel_version():
    """(major, minor) of the running kernel; (0, 0) where its release does not start so."""
    parts = os.uname().release.split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        return 0, 0


def bound_alone():
    """A bound on the processes of a read that keeps its user's own uid, which counts that user's other
    processes too (a fork bomb would spend the host's pids, and the user's). Since Linux 5.14 the kernel
    counts RLIMIT_NPROC per user namespace: in one of its own, mapping the same single uid (so that the read
    sees nothing differently), the bound covers this read's processes alone. Skipped where the namespace
    maps more (a view with every other uid as nobody would mislead ps and ls) or the kernel counts per uid.
    Root must call it while it still has CAP_SETFCAP, without which the kernel lets no namespace map uid 0.
    The creator of a user namespace holds every capability in it: they are dropped again."""
    if kernel_version() < (5, 14) or not maps_one_uid():
        return False
    if os.geteuid() == 0 and not has_cap(CAP_SETFCAP):
        return False
    if not enter_user_namespace(0):
        return False
    resource.setrlimit(resource.RLIMIT_NPROC, (READER_PROCESSES, READER_PROCESSES))
    drop_every_capability()
    return True


def set_scratch(path):
    """TMPDIR, and the caches tools write as they read (pip's, under XDG_CACHE_HOME), in the scratch: else pip
    warns on every call that the home's cache is not writable."""
    os.environ["TMPDIR"] = path
    os.environ["XDG_CACHE_HOME"] = path + "/.cache"


def child_start(policy, mechanism, argv, prepared, scratch, out_w, err_w, channel):
    """Runs in the forked child: build the sandbox, then exec the command. Never returns.
    `prepared`: a server made the shared namespace already (namespace mode)."""
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # A session of its own, hence a process group the supervisor kills whole and, where the kernel groups
        # sessions for its scheduler (autogroup), one share of the CPU for all the read's processes: a read
        # that spins thousands of them slows itself, not the host's own work (the supervisor among it).
        os.setsid()
        ports = policy.get("ports") or []
        families = [AF_NETLINK]
        bound_the_command()
        if mechanism == "namespaces":
            if not prepared:
                prepare_namespace()
            enter_read_namespace(policy.get("scratch_mb", 64), bool(ports))
            if ports:
                families += [AF_INET, AF_INET6]
                start_relay(policy.get("listening", ports), channel, out_w, err_w)
            try:
                drop_to_reader()
                reader = True
            except (SetupError, OSError):
                # Root of a user namespace that maps no uid but its own (a rootless container, `unshare -r`):
                # the reader uid does not exist there. It keeps its uid and loses every capability, as in the
                # Landlock mode; the mounts stay read-only all the same, and seccomp keeps it from its own
                # uid's other processes.
                bound_alone()
                drop_every_capability()
                reader = False
            if reader:
                families.append(AF_UNIX)  # a daemon sees the sandbox's own uid, to which it grants nothing
                bound_the_reader()
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a change of credentials cleared it
            landlock_scope()
            set_scratch("/dev/shm")
            install_seccomp(families, same_uid=not reader)
        else:
            abi = landlock_abi()
            root = os.geteuid() == 0
            reader = landlock_identity(scratch)
            if reader:
                bound_the_reader()
                # A daemon sees the reader's uid, to which it grants nothing, as in the namespace mode; CUDA's
                # initialisation needs a unix socket (torch fails with error 304 without one). The user's own
                # uid keeps none: a daemon may trust that user (docker's group).
                families.append(AF_UNIX)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a change of credentials clears it
            if ports and not root and private_network():
                families += [AF_INET, AF_INET6]
                start_relay(policy.get("listening", ports), channel, out_w, err_w)
            elif ports and abi >= 4:  # Landlock's port rules alone: those ports on any address
                families += [AF_INET, AF_INET6]
            if not reader and not root:  # root's, in landlock_identity
                bound_alone()
            # CUDA's driver names its threads in /proc (/proc/self/task/TID/comm) as it starts, and fails with
            # error 304 when it cannot. The reader may write /proc as in the namespace mode: the kernel's owner
            # checks leave it nothing of another process, nor /proc/sys. A user's own uid would reach that
            # user's other processes: it gets /proc/self, which this process keeps after exec (its children,
            # a pipeline's CUDA program among them, do not).
            landlock_restrict(abi, scratch, ports if abi >= 4 else [], writable=("/proc",) if reader else ("/proc/self",))
            set_scratch(scratch)
            install_seccomp(families, same_uid=True)
        # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: `cat big | head`
        # would then end with EPIPE (status 1) instead of dying of SIGPIPE as it does outside.
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, 65536)
        os.environ.pop("PYTHONSAFEPATH", None)
        os.execvp(argv[0], argv)
    except SetupError as e:
        status("cannot set up the read sandbox (%s); the command did not run" % e, err_w)
    except Exception as e:  # noqa: BLE001 - any failure before exec means the command must not run
        status("cannot set up the read sandbox (%s: %s); the command did not run" % (type(e).__name__, e), err_w)
    os._exit(EXIT_SETUP)


def outrank_the_read():
    """The supervisor, which ends the read at its bound, must not wait for CPU behind what it bounds: a read
    that spins many processes (or sessions, each a scheduling group of its own) would otherwise delay the
    kill past the bound. Where it may (root), it takes the lowest real-time priority: it sleeps but for the
    moments it copies output or kills, and the kernel keeps real-time tasks to 95% of a CPU at most. Not
    inherited by what it forks (SCHED_RESET_ON_FORK); the read forked before it, as an ordinary task."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR | getattr(os, "SCHED_RESET_ON_FORK", 0x40000000), os.sched_param(1))
    except (OSError, AttributeError):
        pass


def kill_leftovers(pgid):
    """Kill the command's process group, then every process that was re-parented to this one (the
    supervisor is a subreaper: whatever the command left running becomes its child)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    me = str(os.getpid())
    for _ in range(50):
        try:
            while True:  # reap what has ended; ChildProcessError: no child left at all
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
        except ChildProcessError:
            return
        children = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2:].split()[1] == me:
                children.append(int(entry))
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.01)


def run(policy, argv, prepared=False):
    info = probe()
    mechanism = policy.get("mechanism") or info["mechanism"]
    if mechanism == "none" or mechanism not in ("namespaces", "landlock"):
        status("no read sandbox can be set up on this host (not root, and no Landlock); the command did not run")
        return EXIT_SETUP
    if mechanism == "namespaces" and info["mechanism"] != "namespaces":
        status("the namespace sandbox needs root with CAP_SYS_ADMIN; the command did not run")
        return EXIT_SETUP
    timeout = float(policy.get("timeout_s", 600))
    max_output = int(policy.get("max_output", 32 << 20))
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    scratch = None
    if mechanism == "landlock":  # the namespace mode's scratch is a tmpfs in the command's own /dev
        base = os.environ.get("TMPDIR") or "/tmp"
        if not os.path.isdir(base):
            base = "/tmp"
        scratch = os.path.join(base, ".upgrade-agent-sandbox-%d-%d" % (os.getpid(), time.time_ns() % 10**9
                                                                       if hasattr(time, "time_ns") else 0))
        os.mkdir(scratch, 0o700)
    channel = outside = None
    if policy.get("ports"):
        import socket
        outside, channel = socket.socketpair()
        policy = dict(policy, listening=listening_ports(policy["ports"]))
        closed = [str(port) for port in policy["ports"] if port not in policy["listening"]]
        if closed:  # a fact of the host's, for whoever reads a refused connection: not the sandbox's doing
            status("%s %s: connections to %s are refused, as they would be outside the sandbox"
                   % (NOTHING_LISTENS, ", ".join(closed), "it" if len(closed) == 1 else "them"))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if mechanism == "namespaces" or os.geteuid() == 0:
        # The command may reopen its output by path (`> /dev/stderr`, `tee /dev/stdout`: /proc/self/fd/N),
        # which the kernel allows the pipe's owner only: the reader uid, not the root who made it.
        for fd in (out_w, err_w):
            try:
                os.fchown(fd, SANDBOX_UID, SANDBOX_UID)
            except OSError:  # EINVAL: a user namespace that maps no reader uid; the command keeps root's uid
                pass
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        if outside is not None:
            outside.close()
        child_start(policy, mechanism, argv, prepared, scratch, out_w, err_w, channel)
    outrank_the_read()
    os.close(out_w)
    os.close(err_w)
    if channel is not None:
        import threading
        channel.close()
        threading.Thread(target=serve_outside, args=(outside,), daemon=True).start()
    # No setpgid here: the child's setsid fails for a group leader. A kill before the child's setsid finds it
    # among the supervisor's children (kill_leftovers).
    streams = {out_r: 1, err_r: 2}
    written, deadline, stopped, code, grace = 0, time.monotonic() + timeout, None, None, None
    while streams:
        if CANCELLED:
            stopped = "cancel"
            break
        now = time.monotonic()
        if code is None:
            done, status_code = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                code, grace = status_code, now + 0.2  # what it left running may hold the pipes: not for long
        if now >= deadline:
            stopped = "time"
            break
        if grace is not None and now >= grace:
            break
        try:
            ready, _, _ = select.select(list(streams), [], [], min(deadline - now, 0.05 if grace else 0.25))
        except InterruptedError:
            continue
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                os.close(fd)
                del streams[fd]
                continue
            if written + len(chunk) > max_output:
                chunk = chunk[:max(0, max_output - written)]
                stopped = "output"
            written += len(chunk)
            try:
                emit(streams[fd], chunk)
            except OSError:
                stopped = stopped or "reader"
            if stopped:
                break
        if stopped:
            break
    pause = 0.0005
    while code is None and not stopped:  # the output ended; the command itself may still run (until the bound)
        done, status_code = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            code = status_code
        elif time.monotonic() >= deadline:
            stopped = "time"
        elif CANCELLED:
            stopped = "cancel"
        else:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    kill_leftovers(pid)
    if scratch is not None:
        import shutil
        shutil.rmtree(scratch, ignore_errors=True)
    if stopped == "cancel":  # the caller asked for it, and knows
        return EXIT_CANCELLED
    if stopped == "time":
        status("stopped after %g s, the read's time bound: a read that does not end by itself needs a bound "
               "(timeout N, head -n N, a count such as -c N)" % timeout)
        return EXIT_TIME
    if stopped == "output":
        status("stopped after %d bytes of output, the read's bound: narrow it (grep, head, tail -n N)" % max_output)
        return EXIT_OUTPUT
    if os.WIFSIGNALED(code):
        if os.WTERMSIG(code) == signal.SIGSYS:
            status("the sandbox's system-call filter stopped the command")
        return 128 + os.WTERMSIG(code)
    return os.WEXITSTATUS(code)


# ---- the server: one per host and session, a read per request -------------------------------------------------

def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(policy):
    """Reads requests on stdin, runs each read as `run` does (in a process of its own, forked from this one,
    which made the shared namespace once), and writes what they print on stdout, framed (FRAME):

        in:  R id {"command", "timeout_s", "ports", "env"}   run a read      K id   stop it
        out: S 0 {probe}   the server is ready   O/E id DATA   its output    X id CODE   it ended

    The cost of a read is then a fork and its own /dev, not an interpreter, this program and a namespace.
    It ends when stdin closes (the session ended, or its connection), stopping the reads still running."""
    import json
    info = probe()
    mechanism = policy.get("mechanism") or info["mechanism"]
    if mechanism not in ("namespaces", "landlock") or (mechanism == "namespaces" and info["mechanism"] != "namespaces"):
        status("no read sandbox of the %s kind can be set up on this host; the server did not start" % mechanism)
        return EXIT_SETUP
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if mechanism == "namespaces":
        prepare_namespace()
    for families in ([AF_NETLINK, AF_UNIX], [AF_NETLINK, AF_INET, AF_INET6, AF_UNIX]) if mechanism == "namespaces" else \
            ([AF_NETLINK], [AF_NETLINK, AF_INET, AF_INET6], [AF_NETLINK, AF_UNIX],
             [AF_NETLINK, AF_UNIX, AF_INET, AF_INET6]):  # made once here, forked into every read
        PROGRAMS[(tuple(families), mechanism != "namespaces")] = seccomp_program(families, mechanism != "namespaces")
    frames_r, frames_w = os.pipe()
    hello = json.dumps(dict(info, mechanism=mechanism)).encode()
    write_all(1, FRAME.pack(b"S", 0, len(hello)) + hello)
    running, pending, reading, stop_by = {}, b"", True, None
    while reading or running:
        while running:  # reap the requests that ended
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            for rid, child in list(running.items()):
                if child == pid:
                    del running[rid]
        if stop_by is not None and time.monotonic() > stop_by:
            for child in running.values():
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
        try:
            ready, _, _ = select.select([frames_r, 0] if reading else [frames_r], [], [], 0.1)
        except InterruptedError:
            continue
        try:
            if frames_r in ready:
                write_all(1, os.read(frames_r, 65536))
            if 0 in ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    raise BrokenPipeError
                pending += chunk
                while len(pending) >= FRAME.size:
                    kind, rid, size = FRAME.unpack_from(pending)
                    if len(pending) < FRAME.size + size:
                        break
                    data, pending = pending[FRAME.size:FRAME.size + size], pending[FRAME.size + size:]
                    if kind == b"R" and rid not in running:
                        running[rid] = start_request(policy, mechanism, rid, json.loads(data.decode()), frames_r,
                                                     frames_w)
                    elif kind == b"K" and rid in running:
                        os.kill(running[rid], signal.SIGUSR1)
        except OSError:  # stdin closed or stdout gone: the session is over, and so are its reads
            if stop_by is not None:
                continue  # told already; what they still write has nowhere to go
            reading, stop_by = False, time.monotonic() + 2
            for child in running.values():
                try:
                    os.kill(child, signal.SIGUSR1)
                except OSError:
                    pass
    while True:  # what the last reads wrote
        ready, _, _ = select.select([frames_r], [], [], 0)
        if not ready:
            break
        try:
            write_all(1, os.read(frames_r, 65536))
        except OSError:
            break
    return 0


def start_request(policy, mechanism, rid, request, frames_r, frames_w):
    """Fork the read's supervisor; it runs `run` with its output framed to the server, then says how it ended."""
    global OUT
    pid = os.fork()
    if pid:
        return pid
    code = EXIT_SETUP
    try:
        os.close(frames_r)
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        OUT = (frames_w, rid)
        signal.signal(signal.SIGUSR1, lambda *_: CANCELLED.append(True))
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for key, value in (request.get("env") or {}).items():
            os.environ[key] = value
        read_policy = dict(policy, mechanism=mechanism, timeout_s=float(request.get("timeout_s") or 600),
                           ports=[int(p) for p in request.get("ports") or []])
        code = run(read_policy, ["bash", "--noprofile", "--norc", "-c", request["command"]],
                   prepared=mechanism == "namespaces")
    except BaseException as e:  # noqa: BLE001 - the server must hear that this read ended, whatever happened
        status("the read sandbox failed (%s: %s); the command may not have run" % (type(e).__name__, e))
    try:
        text = str(code).encode()
        os.write(frames_w, FRAME.pack(b"X", rid, len(text)) + text)
    finally:
        os._exit(0)


def parse_policy(text):
    policy = {}
    for item in filter(None, text.split(";")):
        key, _, value = item.partition("=")
        if key == "mechanism":
            policy[key] = value
        elif key == "ports":
            policy[key] = [int(p) for p in value.split(",") if p]
        elif key in ("timeout_s",):
            policy[key] = float(value)
        elif key in ("max_output", "scratch_mb"):
            policy[key] = int(value)
        else:
            raise ValueError("unknown key %r" % key)
    return policy


def main(args):
    if args[:1] == ["--probe"]:
        import json
        sys.stdout.write(json.dumps(probe()) + "\n")
        return 0
    if args[:1] == ["--serve"] and len(args) == 2:
        try:
            return serve(parse_policy(args[1]))
        except SetupError as e:
            status("cannot set up the read sandbox (%s); the server did not start" % e)
            return EXIT_SETUP
    if len(args) < 3 or args[1] != "--":
        status("usage: launcher POLICY_JSON -- COMMAND...")
        return EXIT_SETUP
    try:
        policy = parse_policy(args[0])
    except ValueError as e:
        status("the policy %r is not valid (%s)" % (args[0], e))
        return EXIT_SETUP
    try:
        return run(policy, args[2:])
    except SetupError as e:
        status("cannot set up the read sandbox (%s); the command did not run" % e)
        return EXIT_SETUP


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
