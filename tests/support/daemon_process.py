"""``streamfair serve`` in a subprocess, for the tests of the daemon's signals, restarts and logs.

Every :class:`DaemonProcess` is registered in ``DaemonProcess.running``; the autouse fixture of
``tests/conftest.py`` kills those a test left behind, whatever its outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from connectors.kafka.broker import die_with_parent
from tests.support import REPO


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2, context=None):
    """The first true value of ``predicate()``, polled every ``interval`` s; fails after ``timeout`` s.

    ``context()``: what the failure message adds (e.g. the daemon's last log events).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}" + (f": {context()}" if context else "")
        time.sleep(interval)


class DaemonProcess:
    """``streamfair serve`` in a subprocess, its JSON log lines collected from stderr."""

    running: list[DaemonProcess] = []  # killed after each test, whatever its outcome

    def __init__(self, config_path: Path, *args: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "connectors.cli", "serve", "--config", str(config_path), *args],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("STREAMFAIR_")}, preexec_fn=die_with_parent,
        )
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        DaemonProcess.running.append(self)

    def _read(self) -> None:
        for line in self.process.stderr:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"event": "raw", "text": line})

    def named(self, event: str) -> list[dict]:
        return [e for e in list(self.events) if e.get("event") == event]

    def restored(self, since: int = 0) -> dict[int, dict]:
        """The last ``restored`` event of each partition among the events from index ``since`` on."""
        return {e["partition"]: e for e in list(self.events)[since:] if e.get("event") == "restored"}

    def wait_restored(self, partitions: set[int], timeout: float = 40.0, since: int = 0) -> list[dict]:
        """Wait until every partition of ``partitions`` was restored (from event ``since`` on); all restores so far."""
        def done():
            assert self.process.poll() is None, f"daemon exited: {self.events[-5:]}"
            return self.restored(since).keys() >= partitions
        wait_for(done, timeout, f"restore of {partitions}")
        return self.named("restored")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code
