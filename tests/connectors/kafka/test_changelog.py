"""Checkpoints in the changelog as one record or as parts and a manifest (pure logic).

The reader is fed the records a compacted topic may hold, in log order: checkpoints of either
kind, the parts of writes that failed half-way, and the tombstones that delete superseded parts.
A restore reads a changelog partition to its end however long that takes, while it makes progress.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from connectors.kafka.changelog import ChangelogPartition, ChangelogRecords, UnreadableCheckpoint, read_checkpoints
from connectors.kafka.transport import TopicPartition
from tests.support.consumer_records import Record

KEY = b"orders:3"


def written(data: bytes, record_bytes: int) -> list[tuple[bytes, bytes | None]]:
    """The records of one checkpoint in the order the daemon sends them: its parts, then its head."""
    records = ChangelogRecords.of(KEY, data, record_bytes)
    return [*records.parts, (KEY, records.head)]


def read(records) -> ChangelogPartition:
    reader = ChangelogPartition(KEY)
    for key, value in records:
        reader.add(key, value)
    return reader


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101, 250, 1000])
def test_every_checkpoint_comes_back_whole_and_no_record_holds_more_than_the_limit(size):
    data = np.random.default_rng(size).bytes(size)
    records = ChangelogRecords.of(KEY, data, record_bytes=100)
    assert len(records.parts) == (0 if size <= 100 else -(-size // 100))
    assert all(len(value) <= 100 for _, value in records.parts)
    assert records.head == data if size <= 100 else json.loads(records.head)["bytes"] == size
    assert records.largest == max(len(value) for value in [records.head, *(v for _, v in records.parts)])
    assert read(written(data, 100)).checkpoint() == data


def test_the_last_checkpoint_is_current_whichever_kind_each_is():
    small, large, larger = b"s" * 50, bytes(range(256)) * 2, bytes(range(255, -1, -1)) * 3
    history = written(small, 100) + written(large, 100) + written(larger, 100)
    reader = read(history)
    assert reader.checkpoint() == larger
    assert reader.current_parts() == ChangelogRecords.of(KEY, larger, 100).part_keys
    assert reader.stale_parts() == ChangelogRecords.of(KEY, large, 100).part_keys
    reader.add(KEY, small)
    assert reader.checkpoint() == small and reader.current_parts() == frozenset()
    assert len(reader.stale_parts()) == 6 + 8


def test_tombstones_delete_superseded_parts_and_a_tombstone_of_the_key_the_checkpoint():
    first, second = b"a" * 300, b"b" * 300
    history = written(first, 100) + written(second, 100)
    history += [(key, None) for key in ChangelogRecords.of(KEY, first, 100).part_keys]
    reader = read(history)
    assert reader.checkpoint() == second and reader.stale_parts() == set()
    reader.add(KEY, None)
    assert reader.checkpoint() is None and reader.current_parts() == frozenset()
    assert reader.stale_parts() == ChangelogRecords.of(KEY, second, 100).part_keys


def test_parts_of_a_write_that_failed_half_way_are_stale_and_do_not_disturb():
    before, failed = b"x" * 250, b"y" * 250
    history = written(before, 100) + ChangelogRecords.of(KEY, failed, 100).parts[:2]  # no third part, no manifest
    reader = read(history)
    assert reader.checkpoint() == before
    assert reader.stale_parts() == set(ChangelogRecords.of(KEY, failed, 100).part_keys) - {
        ChangelogRecords.of(KEY, failed, 100).parts[2][0]}


def test_records_of_other_keys_are_ignored():
    data = b"z" * 250
    history = written(data, 100)
    others = [(b"orders:30", b"other"), (b"orders:3x", b"other"), (None, b"no key"), (b"orders:30#ab/0/1", b"q")]
    reader = read(others[:2] + history[:1] + others[2:] + history[1:])
    assert reader.checkpoint() == data and reader.stale_parts() == set()


def test_a_manifest_without_all_its_parts_or_with_other_bytes_is_an_error_naming_the_checkpoint():
    data = b"w" * 250
    records = ChangelogRecords.of(KEY, data, 100)
    with pytest.raises(UnreadableCheckpoint, match=r"^checkpoint 'orders:3' lacks 1 of its 3 parts, first 'orders:3#"):
        read([*records.parts[:2], (KEY, records.head)]).checkpoint()
    (last_key, _), tampered = records.parts[2], [*records.parts[:2]]
    with pytest.raises(UnreadableCheckpoint, match="its parts make 250 bytes of digest .* its manifest says 250 of "):
        read([*tampered, (last_key, b"v" * 50), (KEY, records.head)]).checkpoint()


@pytest.mark.parametrize("manifest", [b'{"format":"streamfair.checkpoint-parts/1"', b'{"format":'
                                      b'"streamfair.checkpoint-parts/1","digest":"00","parts":"two","bytes":10}'],
                         ids=["cut-short", "parts-not-a-number"])
def test_a_malformed_manifest_is_an_unreadable_checkpoint(manifest):
    with pytest.raises(UnreadableCheckpoint, match="^checkpoint 'orders:3': a manifest that is not one"):
        read([(KEY, manifest)]).checkpoint()


@pytest.mark.parametrize("field, value", [("parts", "2"), ("parts", 2.5), ("parts", 0), ("bytes", -1), ("bytes", "10")])
def test_a_manifest_whose_counts_are_not_whole_numbers_is_unreadable_naming_the_count(field, value):
    """Its parts (at least one) and bytes are integers as written, not numbers that ``int()`` would make integers."""
    manifest = {"format": "streamfair.checkpoint-parts/1", "digest": "00", "parts": 2, "bytes": 10} | {field: value}
    reader = read([(KEY, json.dumps(manifest, separators=(",", ":")).encode())])
    for call in (reader.checkpoint, reader.current_parts, reader.stale_parts):
        with pytest.raises(UnreadableCheckpoint, match=f"a manifest that is not one .*{field} must be an integer"):
            call()


@pytest.mark.parametrize("record_bytes", [0, -1, 1.5])
def test_records_of_less_than_one_byte_are_refused_naming_record_bytes(record_bytes):
    """No division by zero, and no manifest of no parts that no reader could put together again."""
    with pytest.raises(ValueError, match=rf"^record_bytes must be an integer >= 1, got {record_bytes}$"):
        ChangelogRecords.of(KEY, b"abc", record_bytes)


def test_the_layout_is_deterministic_and_keyed_by_the_content():
    data = b"q" * 250
    assert ChangelogRecords.of(KEY, data, 100) == ChangelogRecords.of(KEY, data, 100)
    assert ChangelogRecords.of(KEY, data, 100).part_keys.isdisjoint(ChangelogRecords.of(KEY, b"r" * 250, 100).part_keys)


class Trickling:
    """A consumer of changelog partition 0 whose every fetch takes ``every_s`` and moves one record on.

    A record ``None`` was compacted away: its fetch moves the position and hands out nothing.  The
    fetches stop moving at ``stalled_at`` (a broker that no longer answers).
    """

    def __init__(self, records: list, every_s: float, stalled_at: int | None = None):
        self.records, self.every_s, self.stalled_at = records, every_s, stalled_at
        self.offset = 0

    def assign(self, partitions):
        pass

    def seek(self, tp, offset):
        self.offset = offset

    def poll(self, timeout_ms):
        time.sleep(self.every_s)
        if self.offset >= len(self.records) or self.offset == self.stalled_at:
            return {}
        record, self.offset = self.records[self.offset], self.offset + 1
        return {} if record is None else {TopicPartition("changelog", 0): [record]}

    def highwater(self, tp):
        return len(self.records)

    def position(self, tp):
        return self.offset


def changelog_records(data: bytes, record_bytes: int, compacted: int = 0) -> list:
    """The changelog records of checkpoint ``data``, after ``compacted`` records compacted away."""
    records: list = [None] * compacted
    for key, value in written(data, record_bytes):
        records.append(Record("changelog", 0, len(records), 0, key, value, []))
    return records


@pytest.mark.parametrize("compacted", [0, 41], ids=["records", "positions-then-records"])
def test_a_restore_reads_on_as_long_as_records_arrive_or_the_position_moves(compacted):
    """Records, or positions moved past records compacted away, for twice the stall timeout each: read to the end."""
    data = np.random.default_rng(7).bytes(2000)
    consumer = Trickling(changelog_records(data, 50, compacted), every_s=2 * 0.25 / 41)  # 41 records: 0.5 s
    started = time.monotonic()
    read = read_checkpoints(consumer, "changelog", {0: KEY}, stall_timeout_s=0.25)
    assert read[0].checkpoint() == data and time.monotonic() - started > (1 + compacted / 41) * 0.5 * 0.9


def test_a_restore_that_makes_no_progress_for_the_stall_timeout_fails():
    consumer = Trickling(changelog_records(b"s" * 2000, 50), every_s=0.01, stalled_at=10)
    started = time.monotonic()
    stalled = r"^reading 'changelog' partitions \[0\]: no record and no progress for 0.2 s$"
    with pytest.raises(TimeoutError, match=stalled):
        read_checkpoints(consumer, "changelog", {0: KEY}, stall_timeout_s=0.2)
    assert consumer.offset == 10 and 0.2 < time.monotonic() - started < 3
