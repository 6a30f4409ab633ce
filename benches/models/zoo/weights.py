"""The zoo's seeded tensors: splitmix64 → uniform floats, the same in Python and in Rust
(benches/tests/models.rs implements it identically), so that the tests regenerate weights instead
of committing them.

For a tensor of n elements with seed s, element i (0-based) is

    z  = s + (i + 1) · 0x9E3779B97F4A7C15          (mod 2^64)
    z  = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9      (mod 2^64)
    z  = (z ^ (z >> 27)) · 0x94D049BB133111EB      (mod 2^64)
    z  =  z ^ (z >> 31)
    u  = (z >> 40) · 2^-24                         (exact in float32, in [0, 1))
    v  = float32(float32(2u - 1) · scale) + offset (float32 arithmetic, one rounding each)

and the seed of a tensor named `name` in a network with seed S is the 64-bit FNV-1a hash of the
bytes of f"{S}:{name}".
"""

import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
CHUNK = 1 << 22


def tensor_seed(network_seed, name):
    """FNV-1a (64-bit) of f"{network_seed}:{name}"."""
    h = FNV_OFFSET
    for byte in f"{network_seed}:{name}".encode():
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def splitmix_uniform(seed, n, scale=1.0, offset=0.0):
    """n float32 values uniform in [offset - scale, offset + scale), as the module doc says."""
    out = np.empty(n, dtype=np.float32)
    seed = np.uint64(seed)
    scale = np.float32(scale)
    offset = np.float32(offset)
    with np.errstate(over="ignore"):
        for start in range(0, n, CHUNK):
            i = np.arange(start + 1, min(start + CHUNK, n) + 1, dtype=np.uint64)
            z = seed + i * GAMMA
            z = (z ^ (z >> np.uint64(30))) * MIX1
            z = (z ^ (z >> np.uint64(27))) * MIX2
            z = z ^ (z >> np.uint64(31))
            u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)
            v = (u * np.float32(2) - np.float32(1)) * scale + offset
            out[start : start + len(i)] = v
    return out
