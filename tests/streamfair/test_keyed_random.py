"""Keyed draws: the compiled BLAKE2b against :mod:`hashlib`, and the many-key draws against the one-key draw."""

import hashlib

import numpy as np
import pytest

from streamfair import blake2b
from streamfair.keyed_random import COMPILED_FROM, keyed_uniform, keyed_uniforms

SEEDS = (0, 1, 7, 2**63, 2**64 - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_compiled_digests_are_hashlibs_at_every_block_boundary(seed):
    rng = np.random.default_rng(seed % 1000)
    # 0 bytes: the key block is the final one, which the draws never need (they hash at least the prefix)
    messages = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in (1, 2, 7, 8, 9, 127, 128, 129, 255, 256,
                                                                           257, 384, 1000)]
    offsets = np.cumsum([0] + [len(message) for message in messages])
    words = np.empty(len(messages), dtype=np.uint64)
    blake2b.digest_words(blake2b.keyed_state(seed), np.frombuffer(b"".join(messages), dtype=np.uint8), offsets, words)
    key = seed.to_bytes(8, "little")
    expected = [hashlib.blake2b(message, digest_size=8, key=key).digest() for message in messages]
    assert [int(word).to_bytes(8, "little") for word in words] == expected


KEY_LISTS = {
    "ascii str": [f"order-{i}" for i in range(40)],
    "int": list(range(-20, 20)) + [2**70],
    "long and empty str": ["x" * 300, ""] * 5,
    "non-ASCII str": [f"clé-{i}" for i in range(10)],
    "mixed": ["a", 1] * 5,
    "numpy ints": [np.int64(i) for i in range(10)],
    "bytes": [b"k%d" % i for i in range(10)],
}


@pytest.mark.parametrize("name", list(KEY_LISTS))
@pytest.mark.parametrize("seed", SEEDS)
def test_many_key_draws_are_the_one_key_draws(name, seed):
    keys = KEY_LISTS[name]
    assert len(keys) >= COMPILED_FROM  # every list may take the compiled path
    assert np.array_equal(keyed_uniforms(seed, keys), [keyed_uniform(seed, key) for key in keys])
    few = keys[: COMPILED_FROM - 1]  # hashed one by one
    assert np.array_equal(keyed_uniforms(seed, few), [keyed_uniform(seed, key) for key in few])


def test_a_str_key_and_the_int_of_the_same_digits_draw_apart():
    assert not np.array_equal(keyed_uniforms(3, ["12"] * COMPILED_FROM), keyed_uniforms(3, [12] * COMPILED_FROM))


def test_a_key_of_another_type_is_refused_by_name_on_both_paths():
    for keys in ([True] * COMPILED_FROM, [1.5]):
        with pytest.raises(ValueError, match="key must be an int, str or bytes, got"):
            keyed_uniforms(0, keys)


def test_a_one_key_draw_is_the_top_53_bits_of_the_seed_keyed_blake2b_of_the_typed_key():
    """Known answers from :mod:`hashlib`: the key's type tag and bytes, hashed by BLAKE2b-64 keyed by the seed's
    8 little-endian bytes; the draw is the digest's top 53 bits (little-endian) over 2^53."""
    keys = {3: b"i3", -12: b"i-12", 2**70: b"i" + str(2**70).encode(), np.int64(5): b"i5", "clé": "sclé".encode(),
            b"\x00k": b"b\x00k"}
    for seed in SEEDS:
        for key, data in keys.items():
            digest = hashlib.blake2b(data, digest_size=8, key=seed.to_bytes(8, "little")).digest()
            assert keyed_uniform(seed, key) == (int.from_bytes(digest, "little") >> 11) * 2.0**-53
