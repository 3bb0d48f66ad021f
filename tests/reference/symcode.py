"""The fixed code of a symbol (kernels/symcode.h), in numpy: the same arithmetic,
so the C backends and this reference give the same vectors.

  sym_hash(b"mary")           -> the 64-bit hash of a symbol's bytes (never 0)
  fact_codes(hashes, d)       -> [N, d] float64: Σ_j code_j(hashes[:, j]) over the
                                 nonzero hashes of each fact row, code_j rolled by
                                 slot j (column c gets element (c + j) mod d),
                                 every element rounded to float32 as in C.
"""

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET, _FNV_PRIME = 1469598103934665603, 1099511628211
_M64 = (1 << 64) - 1


def mix64(z):
    """The splitmix64 finaliser on uint64 arrays (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sym_hash(sym):
    """FNV-1a-64 of the bytes, then mix64; 0 becomes 1 (0 means "no symbol")."""
    if isinstance(sym, str):
        sym = sym.encode()
    h = _FNV_OFFSET
    for byte in sym:
        h = ((h ^ byte) * _FNV_PRIME) & _M64
    h = int(mix64(np.uint64(h)))
    return h if h else 1


def codes(hashes, d):
    """[N] uint64 hashes -> [N, d] float64 codes (float32-rounded), unrolled."""
    h = np.asarray(hashes, dtype=np.uint64)[:, None]
    p = np.arange((d + 1) // 2, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        a = mix64(h + _GOLDEN * (np.uint64(2) * p + np.uint64(1)))
        b = mix64(h + _GOLDEN * (np.uint64(2) * p + np.uint64(2)))
    u1 = ((a >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)
    u2 = (b >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    r, t = np.sqrt(-2.0 * np.log(u1)), 6.283185307179586 * u2
    pairs = np.stack([r * np.cos(t), r * np.sin(t)], axis=2).reshape(h.shape[0], -1)[:, :d]
    return pairs.astype(np.float32).astype(np.float64)


def fact_codes(hashes, d):
    """hashes [N, S] uint64 (0 = no symbol) -> [N, d] float64."""
    hashes = np.asarray(hashes, dtype=np.uint64)
    out = np.zeros((hashes.shape[0], d))
    for j in range(hashes.shape[1]):
        present = (hashes[:, j] != 0)[:, None]
        out += np.where(present, np.roll(codes(hashes[:, j], d), -(j % d), axis=1), 0.0)
    return out


def to_halves(hashes):
    """uint64 [...] -> int32 [..., 2] (low, high), the golden files' spelling."""
    h = np.asarray(hashes, dtype=np.uint64)
    lo = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    hi = (h >> np.uint64(32)).astype(np.uint32).view(np.int32)
    return np.stack([lo, hi], axis=-1)


def from_halves(halves):
    """int32 [..., 2] -> uint64 [...]."""
    a = np.asarray(halves).astype(np.int64) & 0xFFFFFFFF
    return (a[..., 0].astype(np.uint64) | (a[..., 1].astype(np.uint64) << np.uint64(32)))
