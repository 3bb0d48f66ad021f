#!/usr/bin/python3
"""Checks a .safetensors file the way the official `safetensors` library reads it.

The official package (huggingface/safetensors) cannot be installed here, so this
script re-implements its reader's validation -- SafeTensors::read_metadata and
Metadata::validate in safetensors/src/tensor.rs -- with the standard library, and
loads every tensor with numpy (falling back to the `array` module if numpy is
missing). Rules, in the reference's order:

  1. the file holds at least the 8-byte little-endian header length N
     (HeaderTooSmall);
  2. N <= 100,000,000 (HeaderTooLarge);
  3. 8 + N <= file size (InvalidHeaderLength);
  4. the header is valid UTF-8 (InvalidHeader) and starts with '{'
     (InvalidHeaderStart);
  5. the header is one JSON object, optionally followed by JSON whitespace (the
     writer pads with spaces); NaN/Infinity literals are not JSON
     (InvalidHeaderDeserialization);
  6. "__metadata__", if present, maps strings to strings; every other entry is
     {"dtype": str, "shape": [uint...], "data_offsets": [uint, uint]};
  7. sorted by data_offsets, each tensor starts where the previous ended,
     starting at 0, with end >= begin (InvalidOffset), and end - begin equals
     prod(shape) * itemsize (TensorInvalidInfo);
  8. the last end + 8 + N is the file size (MetadataIncompleteBuffer).

Stricter than the reference (which would silently keep the last duplicate or
ignore extra keys): duplicate keys anywhere and unknown keys in a tensor entry
are errors. With --ours, also worldstate's writer conventions: N is a multiple
of 8, padding is spaces only, and only F32/I32 tensors.

Usage: check_safetensors.py FILE [--ours] [--json]
Exit status 0: valid; 1: invalid (reason on stderr); 2: usage or I/O error.
--json prints {"ok", "header_len", "metadata", "tensors": {name: {"dtype",
"shape", "sum", "first", "last", "non_finite"}}} on stdout (floats as repr
strings of the float64 value, so they are exact).
"""

import json
import math
import struct
import sys

MAX_HEADER_SIZE = 100_000_000

# dtype -> (itemsize in bytes, numpy dtype or None, array typecode or None)
DTYPES = {
    "BOOL": (1, "?", "B"),
    "U8": (1, "<u1", "B"),
    "I8": (1, "<i1", "b"),
    "F8_E5M2": (1, None, None),
    "F8_E4M3": (1, None, None),
    "I16": (2, "<i2", "h"),
    "U16": (2, "<u2", "H"),
    "F16": (2, "<f2", None),
    "BF16": (2, None, None),
    "I32": (4, "<i4", "i"),
    "U32": (4, "<u4", "I"),
    "F32": (4, "<f4", "f"),
    "F64": (8, "<f8", "d"),
    "I64": (8, "<i8", "q"),
    "U64": (8, "<u8", "Q"),
}
TENSOR_KEYS = {"dtype", "shape", "data_offsets"}


class Invalid(Exception):
    pass


def _no_duplicates(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise Invalid(f"duplicate JSON key {k!r}")
        obj[k] = v
    return obj


def _no_constant(name):
    raise Invalid(f"{name} is not valid JSON")


def _is_uint(v):
    # bool is an int subclass in Python; JSON true is not a number.
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def parse(buf, ours=False):
    """Validates buf; returns (header_len, metadata dict, [(name, info)] by offset)."""
    if len(buf) < 8:
        raise Invalid("HeaderTooSmall: file is shorter than 8 bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > MAX_HEADER_SIZE:
        raise Invalid(f"HeaderTooLarge: header length {n}")
    if 8 + n > len(buf):
        raise Invalid(f"InvalidHeaderLength: header length {n} past file size {len(buf)}")
    raw = buf[8 : 8 + n]
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise Invalid(f"InvalidHeader: not UTF-8 ({e})")
    if not text.startswith("{"):
        raise Invalid("InvalidHeaderStart: header does not start with '{'")
    try:
        # json.loads tolerates trailing JSON whitespace, like serde_json::from_str.
        header = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except Invalid as e:
        raise Invalid(f"InvalidHeaderDeserialization: {e}")
    except ValueError as e:
        raise Invalid(f"InvalidHeaderDeserialization: {e}")
    if not isinstance(header, dict):
        raise Invalid("InvalidHeaderDeserialization: header is not an object")

    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise Invalid("InvalidHeaderDeserialization: __metadata__ is not an object")
        for k, v in metadata.items():
            if not isinstance(v, str):
                raise Invalid(f"InvalidHeaderDeserialization: __metadata__[{k!r}] is not a string")
    else:
        metadata = {}

    tensors = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise Invalid(f"InvalidHeaderDeserialization: entry {name!r} is not an object")
        missing = TENSOR_KEYS - info.keys()
        extra = info.keys() - TENSOR_KEYS
        if missing:
            raise Invalid(f"InvalidHeaderDeserialization: {name!r} lacks {sorted(missing)}")
        if extra:
            raise Invalid(f"{name!r} has unknown keys {sorted(extra)}")
        dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise Invalid(f"InvalidHeaderDeserialization: {name!r} has unknown dtype {dtype!r}")
        if ours and dtype not in ("F32", "I32"):
            raise Invalid(f"{name!r}: dtype {dtype} is not one worldstate writes")
        if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
            raise Invalid(f"InvalidHeaderDeserialization: {name!r} shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(_is_uint(o) for o in offs)):
            raise Invalid(f"InvalidHeaderDeserialization: {name!r} data_offsets {offs!r}")
        tensors.append((name, {"dtype": dtype, "shape": shape, "data_offsets": tuple(offs)}))

    # The reference sorts by (begin, end) and requires an exact tiling from 0.
    tensors.sort(key=lambda t: t[1]["data_offsets"])
    start = 0
    for name, info in tensors:
        s, e = info["data_offsets"]
        if s != start or e < s:
            raise Invalid(f"InvalidOffset: {name!r} data_offsets [{s}, {e}], expected to start at {start}")
        start = e
        nbytes = math.prod(info["shape"]) * DTYPES[info["dtype"]][0]
        if e - s != nbytes:
            raise Invalid(f"TensorInvalidInfo: {name!r} spans {e - s} bytes, shape needs {nbytes}")
    if start + 8 + n != len(buf):
        raise Invalid(
            f"MetadataIncompleteBuffer: tensors end at {start}, data section is {len(buf) - 8 - n} bytes"
        )

    if ours:
        if n % 8 != 0:
            raise Invalid(f"header length {n} is not a multiple of 8")
        end = len(text.rstrip(" \t\n\r"))
        if text[end:].strip(" "):
            raise Invalid("header padding is not spaces")
    return n, metadata, tensors


def load(buf, n, name, info):
    """The tensor as a flat list-like of values (numpy array when available)."""
    size, np_dtype, typecode = DTYPES[info["dtype"]]
    s, e = info["data_offsets"]
    data = buf[8 + n + s : 8 + n + e]
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None and np_dtype is not None:
        arr = np.frombuffer(data, dtype=np.dtype(np_dtype)).reshape(info["shape"])
        return arr.reshape(-1), True
    if typecode is None:
        return None, False
    import array

    a = array.array(typecode)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a, False


def summarize(values, is_np, dtype):
    if values is None:
        return {}
    if is_np:
        import numpy as np

        floats = values.astype(np.float64)
        finite = np.isfinite(floats)
        total = float(np.sum(floats[finite])) if len(floats) else 0.0
        non_finite = int(len(floats) - int(np.count_nonzero(finite)))
        first = float(floats[0]) if len(floats) else None
        last = float(floats[-1]) if len(floats) else None
    else:
        floats = [float(v) for v in values]
        fin = [v for v in floats if math.isfinite(v)]
        total = math.fsum(fin)
        non_finite = len(floats) - len(fin)
        first = floats[0] if floats else None
        last = floats[-1] if floats else None
    r = lambda v: None if v is None else repr(v)
    return {"sum": r(total), "first": r(first), "last": r(last), "non_finite": non_finite}


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) != 1 or flags - {"--ours", "--json"}:
        print("usage: check_safetensors.py FILE [--ours] [--json]", file=sys.stderr)
        return 2
    try:
        with open(args[0], "rb") as f:
            buf = f.read()
    except OSError as e:
        print(f"cannot read {args[0]}: {e}", file=sys.stderr)
        return 2
    try:
        n, metadata, tensors = parse(buf, ours="--ours" in flags)
        out = {"ok": True, "header_len": n, "metadata": metadata, "tensors": {}}
        for name, info in tensors:
            values, is_np = load(buf, n, name, info)
            entry = {"dtype": info["dtype"], "shape": info["shape"], "numpy": is_np}
            entry.update(summarize(values, is_np, info["dtype"]))
            out["tensors"][name] = entry
    except Invalid as e:
        print(f"invalid: {e}", file=sys.stderr)
        if "--json" in flags:
            print(json.dumps({"ok": False, "error": str(e)}))
        return 1
    if "--json" in flags:
        print(json.dumps(out))
    else:
        print(f"ok: {len(tensors)} tensors, header {n} bytes, metadata keys {sorted(metadata)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
