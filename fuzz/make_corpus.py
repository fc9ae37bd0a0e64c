#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: a few small valid
files of each format and edge cases next to them (empty and scalar shapes, other byte orders,
format versions, gzip members, bool bytes other than 0/1, wrong sizes). Rerun after changing a
format; the output is committed (a few KB in all). Needs NumPy for the .npy and safetensors
seeds. Usage: make_corpus.py [target...] (default: every target's seeds)."""
import gzip
import io
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def npy_header(header, data, version=1):
    header += " " * ((64 - (12 + len(header) + 1) % 64) % 64) + "\n"
    h = header.encode("latin1")
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


def npy_seeds():
    put("npy", "f32_2x3", npy(np.arange(6, dtype="<f4").reshape(2, 3)))
    put("npy", "f64_be", npy(np.array([1.5, -2.0], dtype=">f8")))
    put("npy", "i32", npy(np.array([-1, 7, 2**31 - 1], dtype="<i4")))
    put("npy", "i64_be", npy(np.array([[1, -2]], dtype=">i8")))
    put("npy", "u32", npy(np.array([0, 4294967295], dtype="<u4")))
    put("npy", "bool", npy(np.array([True, False, True])))
    put("npy", "fortran", npy(np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3))))
    put("npy", "scalar", npy(np.float32(2.5)))
    put("npy", "empty", npy(np.zeros((0, 3), dtype="<f4")))
    put("npy", "v2", npy(np.arange(4, dtype="<i4"), version=(2, 0)))
    put("npy", "v3", npy(np.arange(3, dtype="<f8"), version=(3, 0)))
    put("npy", "bool_byte2",
        npy_header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b"\x00\x02\xff"))
    put("npy", "dup_key",
        npy_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                   b"\0\0\0\0"))
    put("npy", "shape_list",
        npy_header("{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3], }", b"\0" * 24))
    put("npy", "python2_long",
        npy_header("{'descr': '<i4', 'fortran_order': False, 'shape': (1L,), }", b"\0" * 4))


def idx(type_code, shape, payload):
    return bytes([0, 0, type_code, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape) + payload


def idx_seeds():
    files = {
        "u8_2x3": idx(0x08, [2, 3], bytes(range(6))),
        "i8": idx(0x09, [4], b"\x80\xff\x00\x7f"),
        "i16": idx(0x0B, [2], b"\x80\x00\x01\x02"),
        "i32": idx(0x0C, [2], struct.pack(">ii", -1, 7)),
        "f32": idx(0x0D, [1, 2], struct.pack(">ff", 0.5, -3.0)),
        "f64": idx(0x0E, [1], struct.pack(">d", 1 / 3)),
        "rank0": idx(0x08, [], b"\x05"),
        "empty": idx(0x08, [0, 4], b""),
        "short": idx(0x08, [10], b"\x01" * 5),
        "long": idx(0x08, [2], b"\x01" * 5),
    }
    for name, data in files.items():
        put("idx_plain", name, data)
        # idx_gzip: mode byte < 0x80 means "the target gzips the rest".
        put("idx_gzip", "raw_" + name, b"\x00" + data)
        put("idx_gzip", "gz_" + name, b"\x80" + gzip.compress(data, mtime=0))
    two = gzip.compress(files["u8_2x3"][:10], mtime=0) + gzip.compress(files["u8_2x3"][10:], mtime=0)
    put("idx_gzip", "gz_two_members", b"\x80" + two)
    bomb = idx(0x08, [10], b"\x00" * 10) + b"\x00" * 100000
    put("idx_gzip", "gz_bomb", b"\x80" + gzip.compress(bomb, mtime=0))


def ckpt_body(ints, arrays):
    """A checkpoint file without its trailing CRC-32 (the fuzz target appends it)."""
    def s(x):
        return struct.pack("<Q", len(x)) + x
    out = b"SPMDCKPT" + struct.pack("<I", 1) + struct.pack("<Q", len(ints))
    for k, v in ints:
        out += s(k) + struct.pack("<q", v)
    out += struct.pack("<Q", len(arrays))
    for k, dtype, shape, data in arrays:
        out += s(k) + struct.pack("<QQ", dtype, len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<Q", len(data)) + data
    return out


def checkpoint_seeds():
    # dtype codes: Bool 0, Int32 1, Int64 2, UInt32 3, Float32 6, Float64 7.
    put("checkpoint", "empty", ckpt_body([], []))
    put("checkpoint", "small", ckpt_body(
        [(b"epoch", 3), (b"step", -5)],
        [(b"w", 6, [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
         (b"b", 7, [2], struct.pack("<2d", 0.5, -1)),
         (b"k", 3, [2], struct.pack("<2I", 0, 42)),
         (b"n", 2, [], struct.pack("<q", -7)),
         (b"i", 1, [0, 3], b""),
         (b"mask", 0, [3], b"\x00\x01\x02")]))
    put("checkpoint", "huge_entry", ckpt_body([], [(b"w", 6, [30000, 30000], b"")])[:-8]
        + struct.pack("<Q", 30000 * 30000 * 4))


def safetensors_file(tensors, metadata=None, order=None, dumps=None, pad=True):
    """A safetensors file of (name, dtype, numpy array) tensors, data in `order` (default: name
    order), the header as json.dumps gives it (default: compact, as the reference writes it)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    by_name = {name: (dtype, a) for name, dtype, a in tensors}
    data = b""
    for name in order or sorted(by_name):
        dtype, a = by_name[name]
        b = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = (dumps or (lambda x: json.dumps(x, separators=(",", ":"))))(header).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_raw(header, data=b""):
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    f32 = np.arange(6, dtype="<f4").reshape(2, 3)
    put("safetensors", "f32_2x3", safetensors_file([("w", "F32", f32)]))
    bf16 = (np.array([1.0, -3.140625, 1e38], dtype="<f4").view("<u4") >> 16).astype("<u2")
    every = [("bool", "BOOL", np.array([1, 0, 2, 255], dtype="u1")),
             ("i32", "I32", np.array([[-1, 7], [2**31 - 1, -2**31]], dtype="<i4")),
             ("i64", "I64", np.array(-5, dtype="<i8")),
             ("u32", "U32", np.array([0, 4294967295], dtype="<u4")),
             ("f16", "F16", np.array([0.5, -1.0, 65504], dtype="<f2")),
             ("bf16", "BF16", bf16),
             ("f64", "F64", np.array([1 / 3, -0.0], dtype="<f8")),
             ("c64", "C64", np.array([1 + 2j, -0.5j], dtype="<c8")),
             ("empty", "F32", np.zeros((0, 3), dtype="<f4"))]
    put("safetensors", "every_dtype", safetensors_file(every, metadata={"format": "pt"}))
    # Blocks for the target's 2x2 mesh: even leading dimensions, one odd second dimension.
    put("safetensors", "shardable", safetensors_file(
        [("a", "F32", np.arange(24, dtype="<f4").reshape(4, 6)),
         ("b", "I32", np.arange(12, dtype="<i4").reshape(2, 2, 3)),
         ("c", "F64", np.arange(6, dtype="<f8").reshape(2, 3)),
         ("m", "BOOL", np.array([[0, 1], [3, 0]], dtype="u1"))]))
    put("safetensors", "python_json", safetensors_file(
        every[:4], metadata={"note": "h\u00e9llo"}, order=["u32", "i64", "bool", "i32"],
        dumps=json.dumps, pad=False))
    put("safetensors", "empty", safetensors_file([]))
    put("safetensors", "metadata_only", safetensors_file([], metadata={"a": "b", "c": ""}))
    entry = '"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}'
    put("safetensors", "overlap", safetensors_raw(
        '{"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},'
        '"b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}}', b"\0" * 12))
    put("safetensors", "hole", safetensors_raw(
        '{"a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8))
    put("safetensors", "trailing", safetensors_raw("{" + entry + "}", b"\0" * 25))
    put("safetensors", "short_data", safetensors_raw("{" + entry + "}", b"\0" * 23))
    put("safetensors", "offsets_mismatch", safetensors_raw(
        '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}', b"\0" * 20))
    put("safetensors", "duplicate", safetensors_raw("{" + entry + "," + entry + "}", b"\0" * 24))
    put("safetensors", "dtype_u8", safetensors_raw(
        '{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"\1\2"))
    put("safetensors", "shape_overflow", safetensors_raw(
        '{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}'))
    put("safetensors", "huge_claim", safetensors_raw(
        '{"w":{"dtype":"F64","shape":[30000,30000],"data_offsets":[0,7200000000]}}'))
    put("safetensors", "header_too_long", struct.pack("<Q", 1000) + b"{}")
    put("safetensors", "escaped_names", safetensors_raw(
        '{"\\u0000\\ud83d\\ude00":{"dtype":"I32","shape":[],"data_offsets":[0,4]},'
        '"__metadata__":{"k\\n":"v\\"w"}}', b"\1\0\0\0"))


SEEDS = {"npy": npy_seeds, "idx": idx_seeds, "checkpoint": checkpoint_seeds,
         "safetensors": safetensors_seeds}

if __name__ == "__main__":
    for target in sys.argv[1:] or SEEDS:
        SEEDS[target]()
