"""Reproducible uniform draws keyed by ``(seed, key)``, so that a replayed message gets the same draw.

The draw is a keyed BLAKE2b hash of the key, so it depends only on the seed and the key: not on
the order of calls, the process, the platform or the Python hash seed.

>>> keyed_uniform(7, "order-42") == keyed_uniform(7, "order-42")
True
>>> keyed_uniform(7, "order-42") == keyed_uniform(8, "order-42")
False
>>> 0.0 <= keyed_uniform(0, 123) < 1.0
True
"""

from __future__ import annotations

import functools
import hashlib
import reprlib
from collections.abc import Sequence

import numpy as np

from . import blake2b

Key = int | str | bytes


def counter_key(i: int) -> str:
    """The key of the ``i``-th draw without a key of its own (an object's draw counter supplies ``i``).

    >>> counter_key(3)
    'draw:3'
    """
    return f"draw:{i}"


def _key_bytes(key: Key) -> bytes:
    if isinstance(key, str):
        return b"s" + key.encode("utf-8")
    if type(key) is int:  # the usual integer first, without the checks below (the same bytes)
        return b"i" + str(key).encode("ascii")
    if isinstance(key, bytes):
        return b"b" + key
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return b"i" + str(int(key)).encode("ascii")
    raise ValueError(f"key must be an int, str or bytes, got {reprlib.repr(key)} ({type(key).__name__})")


@functools.lru_cache(maxsize=64)
def _keyed_hash(seed: int):
    """The BLAKE2b state keyed by ``seed`` (copied per draw: same digests, without re-keying each time)."""
    return hashlib.blake2b(digest_size=8, key=seed.to_bytes(8, "little"))


#: From this many keys on, :func:`keyed_uniforms` hashes in one compiled call (the same bits).
COMPILED_FROM = 8


@functools.lru_cache(maxsize=64)
def _compiled_state(seed: int) -> np.ndarray:
    return blake2b.keyed_state(seed)


def _packed_key_bytes(keys: Sequence[Key]) -> tuple[bytes, np.ndarray] | None:
    """The :func:`_key_bytes` of every key, concatenated, and where each starts (and the last ends).

    ``None`` unless the keys are all ASCII ``str`` or all plain ``int`` (others are hashed one by one).
    """
    try:
        text = "s" + "s".join(keys)  # type: ignore[arg-type]  # TypeError unless every key is a str
        names: Sequence[str] = keys  # type: ignore[assignment]
    except TypeError:
        if not all(type(key) is int for key in keys):
            return None
        names = [str(key) for key in keys]
        text = "i" + "i".join(names)
    if not text.isascii():
        return None
    offsets = np.zeros(len(names) + 1, dtype=np.int64)
    offsets[1:] = np.fromiter(map(len, names), dtype=np.int64, count=len(names)) + 1
    return text.encode("ascii"), np.cumsum(offsets, out=offsets)


def keyed_uniform(seed: int, key: Key) -> float:
    """A uniform number in ``[0, 1)`` determined by ``seed`` and ``key``."""
    data = _key_bytes(key)
    if type(seed) is int:
        state = _keyed_hash(seed).copy()
        state.update(data)
        digest = state.digest()
    else:
        digest = hashlib.blake2b(data, digest_size=8, key=seed.to_bytes(8, "little")).digest()
    return (int.from_bytes(digest, "little") >> 11) * 2.0**-53


def keyed_uniforms(seed: int, keys: Sequence[Key]) -> np.ndarray:
    """:func:`keyed_uniform` of each key, as an array (the same numbers, with less per-key overhead).

    >>> bool(keyed_uniforms(7, ["a", 3])[1] == keyed_uniform(7, 3))
    True
    """
    if type(seed) is not int:
        return np.array([keyed_uniform(seed, key) for key in keys])
    if len(keys) >= COMPILED_FROM:
        data = _packed_key_bytes(keys)
        if data is not None:
            text, offsets = data
            words = np.empty(len(keys), dtype=np.uint64)
            blake2b.digest_words(_compiled_state(seed), np.frombuffer(text, dtype=np.uint8), offsets, words)
            return (words >> np.uint64(11)).astype(float) * 2.0**-53
    keyed, key_bytes, from_bytes = _keyed_hash(seed), _key_bytes, int.from_bytes
    draws = []
    for key in keys:
        state = keyed.copy()
        state.update(key_bytes(key))
        draws.append(from_bytes(state.digest(), "little") >> 11)
    return np.array(draws, dtype=float) * 2.0**-53


def sample_indices(proba: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row ``i``'s index drawn from the distribution ``proba[i]`` by the inverse CDF at ``u[i]``.

    >>> sample_indices(np.array([[0.5, 0.5], [0.1, 0.9]]), np.array([0.7, 0.05])).tolist()
    [1, 0]
    """
    cdf = np.cumsum(proba, axis=1)
    return np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(axis=1), proba.shape[1] - 1)
