#!/usr/bin/env python3
"""mkbad.py MODEL OUTDIR - write damaged and unsupported GGUF variants of
MODEL for the error-path tests: notgguf, empty, truncated (header ok, data
cut), badarch (general.architecture renamed), badtype (token_embd.weight
relabelled as Q5_0), badversion (GGUF version 99). Standard library only."""
import os
import struct
import sys

model, out = sys.argv[1], sys.argv[2]
data = bytearray(open(model, "rb").read())

def walk(buf):
    """Yield ('kv', key, type, value_offset) and ('tensor', name, type_offset)."""
    off = 4
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, off)
    off += 20
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(o):
        n, = struct.unpack_from("<Q", buf, o)
        return buf[o + 8:o + 8 + n].decode("utf-8", "replace"), o + 8 + n

    def skip(t, o):
        if t == 8:
            return string(o)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, o)
            o += 12
            for _ in range(n):
                o = skip(et, o)
            return o
        return o + sizes[t]

    for _ in range(n_kv):
        key, off = string(off)
        t, = struct.unpack_from("<I", buf, off)
        off += 4
        yield ("kv", key, t, off)
        off = skip(t, off)
    for _ in range(n_tensors):
        name, off = string(off)
        nd, = struct.unpack_from("<I", buf, off)
        off += 4 + 8 * nd
        yield ("tensor", name, off)
        off += 12

os.makedirs(out, exist_ok=True)
open(os.path.join(out, "notgguf.gguf"), "wb").write(b"this is a text file, not a model\n" * 4)
open(os.path.join(out, "empty.gguf"), "wb").close()
open(os.path.join(out, "truncated.gguf"), "wb").write(data[:len(data) // 2])

bad = bytearray(data)
for item in walk(data):
    if item[0] == "kv" and item[1] == "general.architecture":
        o = item[3] + 8  # skip the string length
        bad[o:o + 5] = b"mamba"
open(os.path.join(out, "badarch.gguf"), "wb").write(bad)

bad = bytearray(data)
for item in walk(data):
    if item[0] == "tensor" and item[1] == "token_embd.weight":
        struct.pack_into("<I", bad, item[2], 20)  # IQ4_NL
open(os.path.join(out, "badtype.gguf"), "wb").write(bad)

bad = bytearray(data)
struct.pack_into("<I", bad, 4, 99)
open(os.path.join(out, "badversion.gguf"), "wb").write(bad)
