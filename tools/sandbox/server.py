"""The read sandbox's server: one launcher per host and session (`launcher.py --serve`), a read per request.

A launcher started for each read costs the host an interpreter, compiling the launcher and building a
namespace: about 40 ms, several times a quick read over a pooled connection. The server pays that once;
each read is then a request on its stdin, forked from a namespace made once (namespace mode) or set up
as before (Landlock), with the same bounds, and its output comes back framed on the server's stdout.

    server = SandboxServer.start(host, info)      # HostError if it cannot start
    result, raw = server.run("cat /etc/os-release", timeout=30, env=None, ports=[], on_output=None, cancel=None)

A server whose stream ends (the connection dropped, the host closed) fails the reads in flight as lost
connections and is not used again; the next read starts another.
"""

from __future__ import annotations

import json
import queue
import shlex
import struct
import threading
import time

from tools.hosts.base import CommandResult, Host, HostError, HostStream, OutputListener

FRAME = struct.Struct("!cII")  # kind, request id, length of the data that follows (launcher.py's FRAME)
START_TIMEOUT_S = 30.0
KILL_WAIT_S = 5.0  # how long a read told to stop may take to say it ended
MARGIN_S = 5.0  # past the read's own bound, the server is taken for lost


class _Read:
    """One request in flight: its output as it comes, and how it ended."""

    def __init__(self, on_output: OutputListener | None):
        self.on_output = on_output
        self.out = bytearray()
        self.err = bytearray()
        self.code: int | None = None
        self.done = threading.Event()

    def received(self, kind: bytes, data: bytes) -> None:
        if kind == b"X":
            self.code = int(data or b"126")
            self.done.set()
            return
        stream = "stdout" if kind == b"O" else "stderr"
        (self.out if kind == b"O" else self.err).extend(data)
        if self.on_output is not None:
            try:
                self.on_output(stream, data)
            except Exception:  # noqa: BLE001 - a listener's failure must not stop the frames of every read
                self.on_output = None


class SandboxServer:
    """A launcher kept open on one host, and the reads it runs."""

    def __init__(self, host_name: str, stream: HostStream, hello: dict):
        self.host_name = host_name
        self.stream = stream
        self.hello = hello
        self.lost: str | None = None  # why the server can no longer be used
        self.closed = False  # closed with its host: the session is ending, and its reads with it
        self._reads: dict[int, _Read] = {}
        self._next_id = 1
        self._lock = threading.Lock()  # the reads' table and the next id
        self._write_lock = threading.Lock()  # one frame at a time on the stream
        self._buffer = bytearray()

    @classmethod
    def start(cls, inner: Host, python: str, boot: str, policy: str, first: bytes = b"") -> "SandboxServer":
        """Start the server on `inner` (`first`: what its stdin gets before any request, the launcher) and
        wait for its hello; HostError when it does not come."""
        stream = inner.open_stream(f"exec {shlex.quote(python)} -I -S -c {shlex.quote(boot)} --serve "
                                   f"{shlex.quote(policy)}")
        try:
            stream.write(first)
        except OSError:
            pass  # the hello will not come either, and the stream's stderr says why
        hello: queue.Queue = queue.Queue()
        server = cls(inner.name, stream, {})
        threading.Thread(target=server._read_frames, args=(hello,), daemon=True,
                         name=f"sandbox-server-{inner.name}").start()
        try:
            server.hello = hello.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            server.hello = None
        if not server.hello:
            said = stream.stderr_tail().strip().splitlines()
            stream.close()
            raise HostError(f"{inner.name}: the read sandbox's server did not start"
                            + (f": {said[-1][:300]}" if said else ""))
        return server

    @property
    def usable(self) -> bool:
        return self.lost is None

    def run(self, command: str, *, timeout: float, env: dict[str, str] | None, ports: list[int],
            on_output: OutputListener | None, cancel: threading.Event | None) -> tuple[CommandResult, bytes]:
        start = time.monotonic()
        read = _Read(on_output)
        request = json.dumps({"command": command, "timeout_s": timeout, "ports": ports, "env": env or {}}).encode()
        with self._lock:
            rid = self._next_id
            self._next_id += 1
            self._reads[rid] = read
        if not self._send(b"R", rid, request):
            return self._lost_result(command, read, start), b""
        cancelled = stop_sent = False
        give_up = start + timeout + MARGIN_S
        while not read.done.wait(0.05):
            now = time.monotonic()
            if self.lost is not None:
                break
            if not stop_sent and cancel is not None and cancel.is_set():
                cancelled = stop_sent = True
                give_up = now + KILL_WAIT_S
                self._send(b"K", rid, b"")
            elif now >= give_up:
                if stop_sent:
                    break
                stop_sent, give_up = True, now + KILL_WAIT_S  # the server's own bound did not stop it
                self._send(b"K", rid, b"")
        with self._lock:
            self._reads.pop(rid, None)
        if not read.done.is_set():
            if cancelled or self.closed:
                return self._result(command, read, start, cancelled=True), bytes(read.out)
            return self._lost_result(command, read, start), bytes(read.out)
        return self._result(command, read, start, cancelled=cancelled), bytes(read.out)

    def close(self) -> None:
        """Ends the server and the reads it still runs (it stops them when its stdin closes)."""
        self.closed = True
        self.lost = self.lost or f"the read sandbox's server on {self.host_name} was closed"
        self.stream.close()

    # -- the stream

    def _send(self, kind: bytes, rid: int, data: bytes) -> bool:
        if self.lost is not None:
            return False
        try:
            with self._write_lock:
                self.stream.write(FRAME.pack(kind, rid, len(data)) + data)
            return True
        except OSError as e:
            self._fail(f"the read sandbox's server on {self.host_name} cannot be reached ({e})")
            return False

    def _read_frames(self, hello: queue.Queue) -> None:
        while True:
            chunk = self.stream.read()
            if not chunk:
                break
            self._buffer.extend(chunk)
            while len(self._buffer) >= FRAME.size:
                kind, rid, size = FRAME.unpack_from(self._buffer)
                if len(self._buffer) < FRAME.size + size:
                    break
                data = bytes(self._buffer[FRAME.size:FRAME.size + size])
                del self._buffer[:FRAME.size + size]
                if kind == b"S":
                    try:
                        hello.put(json.loads(data.decode()))
                    except ValueError:
                        hello.put(None)
                    continue
                with self._lock:
                    read = self._reads.get(rid)
                if read is not None:
                    read.received(kind, data)
        hello.put(None)
        said = self.stream.stderr_tail().strip().splitlines()
        self._fail(f"the read sandbox's server on {self.host_name} stopped"
                   + (f" ({said[-1][:200]})" if said else ""))

    def _fail(self, why: str) -> None:
        if self.lost is None:
            self.lost = why

    # -- results

    def _result(self, command: str, read: _Read, start: float, cancelled: bool = False) -> CommandResult:
        return CommandResult(command=command, exit_code=None if cancelled else read.code,
                             stdout=read.out.decode("utf-8", "replace"), stderr=read.err.decode("utf-8", "replace"),
                             duration_s=time.monotonic() - start, cancelled=cancelled)

    def _lost_result(self, command: str, read: _Read, start: float) -> CommandResult:
        result = self._result(command, read, start)
        result.exit_code = None
        result.connection_lost = True
        result.hint = (f"{self.lost or 'the read sandbox server stopped answering'}; the read was not run again. "
                       "It changed nothing (it ran in the read sandbox): run it again.")
        return result
