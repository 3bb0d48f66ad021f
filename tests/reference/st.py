"""Minimal safetensors reader/writer (F32 and I32 only), standard library + numpy.

Format: 8-byte little-endian header length N, then N bytes of JSON
{"name": {"dtype", "shape", "data_offsets": [b, e]}, ..., "__metadata__": {str: str}}
(padded with spaces to a multiple of 8), then the raw little-endian data; offsets
are relative to the start of the data, tensors laid out in header order without
gaps. The official `safetensors` package is not installed here, hence this file.
"""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "I32": np.dtype("<i4")}


def _dtype_name(arr):
    if arr.dtype.kind == "f":
        return "F32"
    if arr.dtype.kind in "iu":
        return "I32"
    raise ValueError(f"unsupported dtype {arr.dtype}")


def save(path, tensors, metadata=None):
    """tensors: ordered mapping name -> array-like (floats become F32, ints I32).
    metadata: mapping str -> str (optional)."""
    header = {}
    blobs = []
    offset = 0
    for name, value in tensors.items():
        arr = np.asarray(value)
        dt = _dtype_name(arr)
        if dt == "I32" and arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise ValueError(f"{name}: value out of int32 range")
        raw = np.ascontiguousarray(arr, dtype=_DTYPES[dt]).tobytes()
        header[name] = {"dtype": dt, "shape": [int(s) for s in arr.shape],
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError("metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path):
    """Returns (tensors: dict name -> numpy array (header order), metadata: dict)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too small")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} beyond file size")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n:]
    tensors = {}
    expect = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise ValueError(f"{name}: unsupported dtype {info['dtype']}")
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if b != expect or e - b != count * dt.itemsize:
            raise ValueError(f"{name}: bad data_offsets {b},{e}")
        expect = e
        tensors[name] = np.frombuffer(body[b:e], dtype=dt).reshape(shape).copy()
    if expect != len(body):
        raise ValueError(f"{path}: {len(body) - expect} trailing bytes")
    ordered = {name: tensors[name] for name in header}
    return ordered, meta
