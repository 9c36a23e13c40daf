"""Structured logs: one JSON object per line on stderr.

Every line has ``ts`` (UTC, ISO 8601), ``level``, ``logger`` and ``event``, plus the event's fields.

Examples
--------
>>> import io, json, logging
>>> stream = io.StringIO()
>>> logger = setup_logging("INFO", stream=stream, name="doctest")
>>> log_event(logger, logging.INFO, "checkpoint", partitions=[0, 2], seconds=0.004)
>>> line = json.loads(stream.getvalue())
>>> line["event"], line["partitions"], line["level"]
('checkpoint', [0, 2], 'info')
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, TextIO

_FIELDS = "streamfair_fields"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line.

    >>> import logging
    >>> record = logging.LogRecord("streamfair", logging.WARNING, "", 0, "commit_failed", None, None)
    >>> record.created = 0.0
    >>> print(JsonFormatter().format(record))
    {"ts":"1970-01-01T00:00:00.000+00:00","level":"warning","logger":"streamfair","event":"commit_failed"}
    """

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update(getattr(record, _FIELDS, {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


#: kafka-python logs each failed connection attempt (twice a second without a broker): at most one
#: of its records is shown per this many seconds, with the number held back since the last one.
KAFKA_LOG_INTERVAL_S = 10.0


class RateLimit(logging.Filter):
    """Lets one record through per ``interval`` seconds; the next one shown carries ``suppressed``.

    >>> limit = RateLimit(60.0)
    >>> record = logging.LogRecord("kafka", logging.ERROR, "", 0, "connection refused", None, None)
    >>> [limit.filter(record) for _ in range(3)]
    [True, False, False]
    >>> limit.suppressed
    2
    """

    def __init__(self, interval: float):
        super().__init__()
        self.interval = float(interval)
        self.suppressed = 0
        self._last: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if self._last is not None and record.created - self._last < self.interval:
            self.suppressed += 1
            return False
        if self.suppressed:
            setattr(record, _FIELDS, {**getattr(record, _FIELDS, {}), "suppressed": self.suppressed})
        self._last, self.suppressed = record.created, 0
        return True


def setup_logging(level: str | int, stream: TextIO | None = None, name: str = "streamfair") -> logging.Logger:
    """Send ``name``'s records, and kafka-python's errors (rate-limited), as JSON lines to ``stream`` (stderr).

    The logger does not propagate: its records appear once, as JSON, whatever the root logger does.

    >>> import io, logging
    >>> logger = setup_logging("warning", stream=io.StringIO(), name="doctest.setup")
    >>> logger.level == logging.WARNING, logger.propagate, type(logger.handlers[0].formatter).__name__
    (True, False, 'JsonFormatter')
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.setLevel(level if isinstance(level, int) else level.upper())
    logger.propagate = False
    kafka_handler = logging.StreamHandler(handler.stream)
    kafka_handler.setFormatter(JsonFormatter())
    kafka_handler.addFilter(RateLimit(KAFKA_LOG_INTERVAL_S))
    kafka_logger = logging.getLogger("kafka")
    kafka_logger.handlers[:] = [kafka_handler]
    kafka_logger.setLevel(logging.ERROR)
    kafka_logger.propagate = False
    return logger


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log ``event`` with structured ``fields``.

    The fields become keys of the JSON line (any value ``json`` cannot write is written as its ``str``):

    >>> import io, json, logging
    >>> stream = io.StringIO()
    >>> logger = setup_logging("INFO", stream=stream, name="doctest.event")
    >>> log_event(logger, logging.INFO, "restored", partition=1, offset=None, seconds=0.5)
    >>> log_event(logger, logging.DEBUG, "dead_letter", reason="empty")  # below the level: nothing
    >>> {key: value for key, value in json.loads(stream.getvalue()).items() if key != "ts"}
    {'level': 'info', 'logger': 'doctest.event', 'event': 'restored', 'partition': 1, 'offset': None, 'seconds': 0.5}
    """
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={_FIELDS: fields})
