"""A consumer record as a partition task reads it, for tests that hand records to a task directly."""

from __future__ import annotations

from collections import namedtuple

#: What :class:`~connectors.kafka.transport.Record` asks of a consumer record, and nothing more.
Record = namedtuple("Record", "topic partition offset timestamp key value headers")
