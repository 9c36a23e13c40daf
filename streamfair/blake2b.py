"""BLAKE2b (RFC 7693) compiled, for the keyed draws of many keys at once.

:mod:`streamfair.keyed_random` draws a uniform from the 8-byte BLAKE2b digest of a key, keyed by
the seed.  :mod:`hashlib` computes one digest per Python call (about a microsecond with the calls
around it); these functions compute the digests of many keys in one compiled loop and give the
same bits.  The seed's key block is compressed once (:func:`keyed_state`); each key then costs
one compression per 128 bytes of its data.

Digest length and key length are both 8 bytes, as in :func:`streamfair.keyed_random.keyed_uniform`.

>>> import hashlib
>>> import numpy as np
>>> state = keyed_state(7)
>>> out = np.empty(2, dtype=np.uint64)
>>> digest_words(state, np.frombuffer(b"sas", dtype=np.uint8), np.array([0, 2, 3]), out)
>>> expected = [hashlib.blake2b(data, digest_size=8, key=(7).to_bytes(8, "little")).digest()
...             for data in (b"sa", b"s")]
>>> [int(word).to_bytes(8, "little") for word in out] == expected
True
"""

from __future__ import annotations

import numpy as np

from .kernel import compiled

__all__ = ["keyed_state", "digest_words"]

BLOCK = 128
DIGEST_BYTES = KEY_BYTES = 8
#: The initialization vector (the SHA-512 one).
IV = np.array([
    0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
    0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179,
], dtype=np.uint64)
#: The message permutations of the 10 distinct rounds; rounds 10 and 11 repeat rounds 0 and 1.
_PERMUTATIONS = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], dtype=np.int64)
#: The message schedule of the 12 rounds.
SIGMA = np.vstack([_PERMUTATIONS, _PERMUTATIONS[:2]])


@compiled
def _rotate_right(x, n):
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@compiled
def _mix(a, b, c, d, x, y):
    """The mixing function ``G`` on four state words and two message words."""
    a = a + b + x
    d = _rotate_right(d ^ a, 32)
    c = c + d
    b = _rotate_right(b ^ c, 24)
    a = a + b + y
    d = _rotate_right(d ^ a, 16)
    c = c + d
    b = _rotate_right(b ^ c, 63)
    return a, b, c, d


@compiled
def _compress(h, block, start, length, counter, final, m):
    """Compress ``length <= 128`` bytes of ``block`` from ``start`` (zero-padded) into ``h``, in place.

    ``m`` is a 16-word scratch array for the message words.
    """
    m[:] = 0
    for i in range(length):
        m[i >> 3] |= np.uint64(block[start + i]) << np.uint64((i & 7) << 3)
    v0, v1, v2, v3, v4, v5, v6, v7 = h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
    v8, v9, v10, v11, v12, v13, v14, v15 = IV[0], IV[1], IV[2], IV[3], IV[4], IV[5], IV[6], IV[7]
    v12 ^= np.uint64(counter)
    if final:
        v14 = ~v14
    for r in range(12):
        s = SIGMA[r]
        v0, v4, v8, v12 = _mix(v0, v4, v8, v12, m[s[0]], m[s[1]])  # columns
        v1, v5, v9, v13 = _mix(v1, v5, v9, v13, m[s[2]], m[s[3]])
        v2, v6, v10, v14 = _mix(v2, v6, v10, v14, m[s[4]], m[s[5]])
        v3, v7, v11, v15 = _mix(v3, v7, v11, v15, m[s[6]], m[s[7]])
        v0, v5, v10, v15 = _mix(v0, v5, v10, v15, m[s[8]], m[s[9]])  # diagonals
        v1, v6, v11, v12 = _mix(v1, v6, v11, v12, m[s[10]], m[s[11]])
        v2, v7, v8, v13 = _mix(v2, v7, v8, v13, m[s[12]], m[s[13]])
        v3, v4, v9, v14 = _mix(v3, v4, v9, v14, m[s[14]], m[s[15]])
    h[0] ^= v0 ^ v8
    h[1] ^= v1 ^ v9
    h[2] ^= v2 ^ v10
    h[3] ^= v3 ^ v11
    h[4] ^= v4 ^ v12
    h[5] ^= v5 ^ v13
    h[6] ^= v6 ^ v14
    h[7] ^= v7 ^ v15


@compiled
def _key_block_state(key):
    h = IV.copy()
    h[0] ^= np.uint64(0x01010000 | (KEY_BYTES << 8) | DIGEST_BYTES)
    _compress(h, key, 0, key.size, BLOCK, False, np.empty(16, dtype=np.uint64))
    return h


def keyed_state(seed: int) -> np.ndarray:
    """The BLAKE2b state after the key block of ``seed`` (8 little-endian bytes): 8 words.

    >>> keyed_state(0).dtype, keyed_state(0).shape
    (dtype('uint64'), (8,))
    """
    key = np.frombuffer(int(seed).to_bytes(KEY_BYTES, "little"), dtype=np.uint8)
    return _key_block_state(key)


@compiled
def digest_words(state, data, offsets, out):
    """``out[i]``: the 8-byte digest of ``data[offsets[i]:offsets[i + 1]]`` from ``state``, as a little-endian word.

    ``state`` is :func:`keyed_state`'s; ``data`` is ``uint8``; ``offsets`` has ``out.size + 1``
    entries.  Messages shorter than ``2**64 - 256`` bytes (the counter's low word is all that moves).
    """
    h, m = np.empty(8, dtype=np.uint64), np.empty(16, dtype=np.uint64)
    for i in range(out.size):
        h[:] = state
        start, stop = offsets[i], offsets[i + 1]
        counter = BLOCK  # the key block
        while stop - start > BLOCK:  # every block but the last, which is the final one even when full
            counter += BLOCK
            _compress(h, data, start, BLOCK, counter, False, m)
            start += BLOCK
        counter += stop - start
        _compress(h, data, start, stop - start, counter, True, m)
        out[i] = h[0]
