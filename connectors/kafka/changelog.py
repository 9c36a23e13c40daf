"""How checkpoints are laid out in the changelog topic: one record each, or parts and a manifest.

A partition's checkpoint (:meth:`~connectors.kafka.checkpoint.Checkpoint.to_bytes`) is the value of
the record keyed ``"<input topic>:<partition>"`` (:func:`~connectors.kafka.checkpoint.checkpoint_key`)
in the same partition of the compacted changelog.  That key's latest record says which checkpoint
is current; a tombstone there deletes it.

A record may hold 1 MB by default (the producers' and the brokers' limits), and a state of many
groups or a fine grid takes more.  A checkpoint of more than ``record_bytes`` is therefore written
as **parts**: records keyed ``"<input topic>:<partition>#<digest>/<i>/<n>"``, each holding at most
``record_bytes`` of it (``digest`` is a BLAKE2b digest of the whole checkpoint), then a small
**manifest** under the partition's own key.  The writer sends the manifest only once its parts are
acknowledged (or in the same transaction), so a current manifest always finds its parts; the parts
of a checkpoint no longer current are deleted (tombstones) at the next checkpoint.

Examples
--------
A checkpoint of 10 bytes in records of at most 4: three parts, then the manifest, and the reader
puts it together again from the records in the order they were written:

>>> records = ChangelogRecords.of(b"in:0", b"0123456789", record_bytes=4)
>>> [key for key, _ in records.parts]
[b'in:0#893d6e4733f64f4f/0/3', b'in:0#893d6e4733f64f4f/1/3', b'in:0#893d6e4733f64f4f/2/3']
>>> records.head
b'{"format":"streamfair.checkpoint-parts/1","digest":"893d6e4733f64f4f","parts":3,"bytes":10}'
>>> reader = ChangelogPartition(b"in:0")
>>> for key, value in records.parts + [(b"in:0", records.head)]:
...     reader.add(key, value)
>>> reader.checkpoint()
b'0123456789'

A checkpoint that fits is the record itself (no parts); it supersedes the parts above, which the
next checkpoint deletes:

>>> small = ChangelogRecords.of(b"in:0", b"0123", record_bytes=4)
>>> small.parts, small.head
([], b'0123')
>>> reader.add(b"in:0", small.head)
>>> reader.checkpoint(), len(reader.stale_parts())
(b'0123', 3)
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import NamedTuple

from connectors.kafka.transport import Consumer, read_partitions
from streamfair.validation import check_integer

#: The ``format`` of a manifest: the checkpoint is in parts.
MANIFEST_FORMAT = "streamfair.checkpoint-parts/1"
_MANIFEST_START = b'{"format":"' + MANIFEST_FORMAT.encode() + b'"'


class UnreadableCheckpoint(ValueError):
    """A partition's current checkpoint cannot be read: its parts are missing or do not match its
    manifest, or the record is not a checkpoint this version restores."""


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _part_keys(key: bytes, digest: str, n: int) -> list[bytes]:
    return [key + f"#{digest}/{i}/{n}".encode() for i in range(n)]


class Manifest(NamedTuple):
    """What a manifest says of the checkpoint in parts it stands for.

    Attributes
    ----------
    digest
        The BLAKE2b digest of the checkpoint's bytes.
    parts
        How many parts hold them (at least one).
    n_bytes
        How many bytes they make.
    """

    digest: str
    parts: int
    n_bytes: int


class ChangelogRecords(NamedTuple):
    """The changelog records of one checkpoint: its ``parts`` (key, value), then its ``head``.

    ``head`` goes under the partition's own key: the checkpoint itself when it fits in one record
    (then there are no parts), else its manifest.
    """

    parts: list[tuple[bytes, bytes]]
    head: bytes

    @classmethod
    def of(cls, key: bytes, data: bytes, record_bytes: int) -> ChangelogRecords:
        """The records of checkpoint ``data`` under ``key``, none with a value of more than ``record_bytes``.

        ``ValueError`` unless ``record_bytes`` is an integer >= 1.
        """
        check_integer("record_bytes", record_bytes, 1)
        if len(data) <= record_bytes:
            return cls([], data)
        digest = _digest(data)
        keys = _part_keys(key, digest, -(-len(data) // record_bytes))
        parts = [(part_key, data[i * record_bytes:(i + 1) * record_bytes]) for i, part_key in enumerate(keys)]
        manifest = {"format": MANIFEST_FORMAT, "digest": digest, "parts": len(keys), "bytes": len(data)}
        return cls(parts, json.dumps(manifest, separators=(",", ":")).encode())

    @property
    def part_keys(self) -> frozenset[bytes]:
        """The keys of the parts (none when the checkpoint is one record)."""
        return frozenset(key for key, _ in self.parts)

    @property
    def largest(self) -> int:
        """The bytes of the largest value among the records."""
        return max([len(self.head)] + [len(value) for _, value in self.parts])


class ChangelogPartition:
    """The current checkpoint of one task, from the records of its changelog partition read in order.

    Only the records of ``key`` and of its parts count; the parts not deleted are kept until
    :meth:`checkpoint` puts the current one together.

    Parameters
    ----------
    key
        The task's changelog key (:func:`~connectors.kafka.checkpoint.checkpoint_key`).
    """

    def __init__(self, key: bytes):
        self.key = key
        self._prefix = key + b"#"
        self._head: bytes | None = None
        self._parts: dict[bytes, bytes] = {}

    def add(self, key: bytes | None, value: bytes | None) -> None:
        """The next record of the partition (``value`` ``None``: a tombstone)."""
        if key == self.key:
            self._head = value
        elif key is not None and key.startswith(self._prefix):
            if value is None:
                self._parts.pop(key, None)
            else:
                self._parts[key] = value

    def _manifest(self) -> Manifest | None:
        """The current head's manifest (``None``: the head is a checkpoint, or there is none)."""
        head = self._head
        if head is None or not head.startswith(_MANIFEST_START):
            return None
        try:
            manifest = json.loads(head)
            return Manifest(str(manifest["digest"]), check_integer("parts", manifest["parts"], 1),
                            check_integer("bytes", manifest["bytes"], 0))
        except (ValueError, KeyError, TypeError) as error:
            raise UnreadableCheckpoint(f"checkpoint {self.key.decode()!r}: a manifest that is not one "
                                       f"({error!r})") from None

    def current_parts(self) -> frozenset[bytes]:
        """The keys of the current checkpoint's parts (none when it is one record, or there is none)."""
        manifest = self._manifest()
        return frozenset() if manifest is None else frozenset(_part_keys(self.key, manifest.digest, manifest.parts))

    def stale_parts(self) -> set[bytes]:
        """The keys of parts not deleted that belong to no current checkpoint (to delete)."""
        return set(self._parts) - self.current_parts()

    def checkpoint(self) -> bytes | None:
        """The current checkpoint's bytes (``None``: none).

        :class:`UnreadableCheckpoint` when its manifest is malformed or its parts are not all there.
        """
        manifest = self._manifest()
        if manifest is None:
            return self._head
        keys = _part_keys(self.key, manifest.digest, manifest.parts)
        missing = [key for key in keys if key not in self._parts]
        if missing:
            raise UnreadableCheckpoint(f"checkpoint {self.key.decode()!r} lacks {len(missing)} of its {len(keys)} "
                                       f"parts, first {missing[0].decode()!r}")
        data = b"".join(self._parts[key] for key in keys)
        if len(data) != manifest.n_bytes or _digest(data) != manifest.digest:
            raise UnreadableCheckpoint(f"checkpoint {self.key.decode()!r}: its parts make {len(data)} bytes of "
                                       f"digest {_digest(data)}, its manifest says {manifest.n_bytes} of "
                                       f"{manifest.digest}")
        return data


def read_checkpoints(consumer: Consumer, topic: str, keys: dict[int, bytes], stall_timeout_s: float = 30.0,
                     stop: threading.Event | None = None) -> dict[int, ChangelogPartition]:
    """What the changelog ``topic`` holds for the task of each partition ``p`` (its key ``keys[p]``).

    Reads each partition to its end (:func:`~connectors.kafka.transport.read_partitions`, whose
    ``TimeoutError`` it raises when the reading makes no progress for ``stall_timeout_s``).
    """
    readers = {p: ChangelogPartition(key) for p, key in keys.items()}
    read_partitions(consumer, topic, readers, lambda p, record: readers[p].add(record.key, record.value),
                    stall_timeout_s, stop)
    return readers
