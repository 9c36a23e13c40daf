"""The daemon's producer: outputs and dead letters out, and the failure that sends everything back.

:class:`Sender` owns the producer (created again after a failure: its idempotence or transaction
state may be unusable), the open transaction in ``exactly_once`` mode, and :attr:`Sender.failure`:
the error that failed the interval since the last checkpoint.  Once it is set nothing more is sent;
the daemon rewinds every task to its last checkpoint and replays.

:meth:`Sender.deliver` sends what a task made of a poll (:class:`~connectors.kafka.records.TaskResult`):
its dead letters, then its outputs in input order.  An output the producer refuses (too large, say)
becomes a ``processing_error`` dead letter; its sample stays learned (its prediction was made).  A
dead letter too large for the producer keeps its reason and source position and drops the bytes.

A record the *broker* refuses (:class:`~connectors.kafka.transport.RecordRefused`: larger than
the topic's ``max.message.bytes``, a timestamp outside ``message.timestamp.difference.max.ms``, no
key on a compacted topic) is reported after the poll that sent it, when the producer cannot say
which record it was: the interval fails, and its replay sends each record with its own callback.
The records refused then are dead-lettered at the next replay as the producer's refusals are
(a dead letter without its bytes, then without the source's key and headers too, then none), so
a refusal costs two to five replays of the interval instead of a rewind for ever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from connectors.kafka.codec import HEADER_PREFIX, encode_dead_letter
from connectors.kafka.config import Config
from connectors.kafka.logs import log_event
from connectors.kafka.observer import DaemonStats
from connectors.kafka.records import DeadLetter, Output, TaskResult
from connectors.kafka.transport import Producer, RecordRefused, RecordTooLarge, Transport, TransportError

#: Where a record goes and where it came from: (destination topic, source topic, partition, offset).
Destination = tuple[str, str, int, int]


def destination(topic: str, source: Any) -> Destination:
    """The :data:`Destination` of a record for ``topic`` made of the consumer record ``source``."""
    return topic, source.topic, source.partition, source.offset


class Sender:
    """Queues outputs and dead letters on the daemon's producer (see the module's description).

    Parameters
    ----------
    config
        The daemon's configuration (topics, guarantee, producer settings).
    transport
        The Kafka client library that makes the producer.
    stats
        The daemon's counters: ``produced`` and ``dead_letters`` are counted here.
    log
        Where structured events go.
    notify
        ``notify(event, *args)`` calls the daemon's observers (``on_dead_letter``).

    Attributes
    ----------
    producer : Producer
        The current producer (from :meth:`renew` until :meth:`close`; ``RuntimeError`` otherwise).
    failure
        The error that failed the interval since the last checkpoint (``None``: none).
    in_transaction
        ``exactly_once``: a transaction is open.
    refused : dict
        The broker's refusals of records sent since the last checkpoint, by :data:`Destination`
        (only while the records of a replay are identified, after a refusal).

    Examples
    --------
    The producer is made by :meth:`renew` (the daemon calls it once connected); the first failure
    of an interval is the one kept:

    >>> import logging
    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.observer import DaemonStats
    >>> from connectors.kafka.transport import transport
    >>> config = load_config(env={}, overrides=["processing.guarantee=exactly_once"])
    >>> sender = Sender(config, transport(config), DaemonStats(), logging.getLogger("streamfair"), print)
    >>> sender.exactly_once, sender.in_transaction, sender.failure
    (True, False, None)
    >>> sender.fail(TransportError("flush timed out"))
    >>> sender.fail(TransportError("commit failed"))
    >>> sender.failure
    TransportError('flush timed out')
    >>> sender.producer
    Traceback (most recent call last):
    ...
    RuntimeError: the daemon's producer is not open (before renew(), or after close())
    """

    def __init__(self, config: Config, transport: Transport, stats: DaemonStats, log: logging.Logger,
                 notify: Callable[..., None]):
        self.config, self.transport, self.stats, self.log, self.notify = config, transport, stats, log, notify
        self.exactly_once = config.processing.guarantee == "exactly_once"
        self.transactional_id: str | None = None
        self._producer: Producer | None = None
        self.failure: BaseException | None = None
        self.in_transaction = False
        self.co_partitioned = False  # outputs go to the input's partition number
        self.dead_co_partitioned = False  # ... and so do dead letters
        self._generation = 0
        self._errback: Callable[[BaseException], None] | None = None
        self.refused: dict[Destination, list[RecordRefused]] = {}
        self._identifying = False  # a refusal failed the interval: each record sent reports its own

    @property
    def producer(self) -> Producer:
        """The current producer (``RuntimeError`` before :meth:`renew` and after :meth:`close`)."""
        if self._producer is None:
            raise RuntimeError("the daemon's producer is not open (before renew(), or after close())")
        return self._producer

    def renew(self) -> None:
        """(Re)create the producer: after a failure its idempotence/transaction state may be unusable."""
        old, self._producer = self._producer, None
        self.in_transaction = False
        if old is not None:
            try:
                old.close(timeout=0)
            except Exception as error:  # a broken producer may fail to close; it is dropped anyway
                log_event(self.log, logging.DEBUG, "close_failed", client="producer", error=repr(error))
        producer = self.transport.producer(self.config, self.transactional_id)
        if self.transactional_id:
            producer.init_transactions()
        self._producer = producer
        self._generation += 1
        generation = self._generation
        self._errback = lambda error: self._on_send_error(error, generation)

    def close(self) -> None:
        """Close the producer (waiting up to a second for queued records); errors only log."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.close(timeout=1.0)
        except Exception as error:  # closing must not mask the real outcome
            log_event(self.log, logging.WARNING, "close_failed", client="producer", error=repr(error))

    def checkpointed(self) -> None:
        """Every record sent so far is acknowledged: refusals are forgotten, records sent as usual."""
        self.refused.clear()
        self._identifying = False

    def fail(self, error: BaseException) -> None:
        """Fail the interval since the last checkpoint (the first failure is kept)."""
        self.failure = self.failure or error

    def begin(self) -> None:
        """``exactly_once``: open a transaction unless one is open."""
        if self.exactly_once and not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True

    def deliver(self, result: TaskResult) -> None:
        """Send what a task made of a poll: its dead letters, then its outputs (:meth:`send_outputs`)."""
        for dead in result.dead_letters:
            self.send_dead_letter(dead)
        self.send_outputs(result.outputs)

    def send_outputs(self, outputs: Sequence[Output]) -> None:
        """Queue a poll's predictions on the output topic, in input order.

        An output the producer refuses (too large, say) becomes a ``processing_error`` dead letter;
        its sample stays learned.  Any other Kafka error fails the interval (see :meth:`_send`): the
        outputs after it are neither sent nor counted.  This is the daemon's per-message path, so
        what is the same for the whole poll (topic, producer, transaction) is looked up once.
        """
        if not outputs or self.failure is not None:
            return
        try:
            self.begin()
        except TransportError as error:
            self.failure = error
            return
        topic, co_partitioned = self.config.topics.output, self.co_partitioned
        send, errback, identifying = self.producer.send, self._errback, self._identifying
        queued = 0
        try:
            for output in outputs:
                if self.failure is not None:  # set by the send before, or by the producer's I/O thread
                    break
                if identifying:
                    where = destination(topic, output.source)
                    refusals = self.refused.get(where)
                    if refusals:  # the broker refused it before: that message's failure
                        self.send_dead_letter(DeadLetter.of_error(output.source, refusals[0]))
                        continue
                    errback = self._reporting(where)
                try:
                    send(topic, key=output.key, value=output.value,
                         partition=output.partition if co_partitioned else None,
                         timestamp_ms=output.timestamp if output.timestamp >= 0 else None, headers=output.headers,
                         on_error=errback)
                    queued += 1
                except Exception as error:  # noqa: BLE001 -- sorted out below
                    if isinstance(error, TransportError) and not isinstance(error, RecordRefused):
                        self.failure = error
                    else:  # a record the producer refuses: that message's failure
                        self.send_dead_letter(DeadLetter.of_error(output.source, error))
        finally:  # counted even when a dead letter's send raises (the daemon's own failure)
            self.stats.produced += queued

    def send_dead_letter(self, dead: DeadLetter) -> None:
        """Queue one record on the dead-letter topic: the source's bytes with why and where from.

        A dead letter the producer refuses keeps its reason and source position in a smaller record:
        too large, without the bytes (``streamfair.value_dropped``), and if that is still too large
        (a large key or large headers), without the source's key and headers too; refused for
        anything else (a header or a partition the client does not take), without the source's
        headers and to the partition the producer picks (``streamfair.headers_dropped`` says why).
        One refused even so is counted (``dead_letter_refused``) and logged at ERROR with its
        position, rather than failing the interval: its replay would be refused again, and the
        daemon would stall on it.  The broker's refusals (known while a replay identifies records)
        are met the same way: a dead letter it refused goes without its bytes, then without the
        source's key and headers too, and one refused even so is counted.
        """
        source = dead.source
        key, value, headers = encode_dead_letter(dead)
        partition = source.partition if self.dead_co_partitioned else None
        topic = self.config.topics.dead_letter
        where = destination(topic, source) if self._identifying else None
        refusals = self.refused.get(where, []) if where else []
        try:
            if len(refusals) > 2:  # by the broker: as it is, without its bytes, and without the source's too
                raise refusals[-1]
            if refusals:
                why = f"refused by the broker ({refusals[0]})"
                queued = (self._send_without_value(topic, where, key, headers, partition, why) if len(refusals) == 1
                          else self._send_position_only(topic, where, headers, partition, why))
            else:
                try:
                    queued = self._send(topic, where, value=value, key=key, headers=headers, partition=partition)
                except RecordTooLarge:  # keep the reason and the source position, drop the bytes
                    try:
                        queued = self._send_without_value(topic, where, key, headers, partition,
                                                          "too large for the producer")
                    except RecordTooLarge:  # a large key or large headers
                        queued = self._send_position_only(topic, where, headers, partition,
                                                          "too large for the producer")
                except Exception as error:  # noqa: BLE001 -- refused as it is: the reason and position alone
                    queued = self._send(topic, where, value=value, key=key, headers=_refused_headers(headers, error))
        except Exception as error:  # noqa: BLE001 -- even so: counted and logged, not replayed forever
            self.stats.errors["dead_letter_refused"] += 1
            log_event(self.log, logging.ERROR, "dead_letter_refused", reason=dead.reason, topic=source.topic,
                      partition=source.partition, offset=source.offset, error=repr(error))
            return
        if not queued:  # the interval failed: the rewind replays this message
            return
        self.stats.dead_letters[dead.reason] += 1
        self.notify("on_dead_letter", dead.reason, source.topic, source.partition)
        log_event(self.log, logging.DEBUG, "dead_letter", reason=dead.reason, topic=source.topic,
                  partition=source.partition, offset=source.offset,
                  **({"error_type": dead.error_type} if dead.error_type else {}))

    def _send_without_value(self, topic: str, where: Destination | None, key: bytes | None,
                            headers: list[tuple[str, bytes]], partition: int | None, why: str) -> bool:
        """A dead letter's reason and source position, without the bytes (``streamfair.value_dropped``: ``why``)."""
        dropped = (HEADER_PREFIX + "value_dropped", why[:500].encode("utf-8", "replace"))
        return self._send(topic, where, value=None, key=key if key is not None else b"", headers=[*headers, dropped],
                          partition=partition)

    def _send_position_only(self, topic: str, where: Destination | None, headers: list[tuple[str, bytes]],
                            partition: int | None, why: str) -> bool:
        """A dead letter's reason and source position alone: without the source's bytes, key and headers."""
        return self._send_without_value(topic, where, b"", _own_headers(headers), partition,
                                        f"{why}; the key and headers too")

    def _send(self, topic: str, where: Destination | None = None, **record: Any) -> bool:
        """Queue one record (its refusal by the broker kept under ``where``, if given); whether it was queued.

        A record the producer refuses raises :class:`~connectors.kafka.transport.RecordRefused` (it is that
        record's problem).  Any other Kafka error fails the interval since the last checkpoint, which
        is replayed after the rewind, so the rest of the poll is not sent (nor counted).
        """
        if self.failure is not None:
            return False
        try:
            self.begin()
            self.producer.send(topic, **record,
                               on_error=self._errback if where is None else self._reporting(where))
        except RecordRefused:
            raise
        except TransportError as error:
            self.failure = error
            return False
        return True

    def _reporting(self, where: Destination) -> Callable[[BaseException], None]:
        """The ``on_error`` of one record: a refusal by the broker is kept under ``where``."""
        generation = self._generation
        return lambda error: self._on_send_error(error, generation, where)

    def _on_send_error(self, error: BaseException, generation: int,
                       where: Destination | None = None) -> None:  # producer I/O thread
        if generation != self._generation:
            return
        if isinstance(error, RecordRefused):
            if where is None:  # which record it was: the replay's records tell
                self._identifying = True
            else:
                self.refused.setdefault(where, []).append(error)
        if self.failure is None:
            self.failure = error


def _refused_headers(headers: list[tuple[str, bytes]], error: Exception) -> list[tuple[str, bytes]]:
    """A dead letter's ``headers`` without the source's (its own are the ``streamfair.*`` ones, see
    :func:`~connectors.kafka.codec.encode_dead_letter`), and ``streamfair.headers_dropped``: why it was refused."""
    why = f"{type(error).__name__}: {error}"
    return _own_headers(headers) + [(HEADER_PREFIX + "headers_dropped", why[:500].encode("utf-8", "replace"))]


def _own_headers(headers: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """A dead letter's own ``streamfair.*`` headers (its reason and source position), without the source's."""
    return [header for header in headers if header[0].startswith(HEADER_PREFIX)]
