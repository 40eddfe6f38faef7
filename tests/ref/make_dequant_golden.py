#!/usr/bin/env python3
"""make_dequant_golden.py - reference dequantization vectors for the unit
tests, from the gguf Python package (llama.cpp's gguf-py, an independent
implementation of the ggml block formats).

For F16, BF16, Q4_0, Q4_1, Q8_0 it quantizes 4 blocks of seeded random floats with
gguf.quants.quantize, then dequantizes them with gguf.quants.dequantize,
and writes tests/golden/dequant/<TYPE>.bin. gguf-py cannot quantize the
k-quants (Q2_K..Q6_K): for those, and for Q5_0/Q5_1, 8 raw blocks are built
from seeded random bytes with extreme scale fields (see K_LAYOUT below) and
only gguf.quants.dequantize is used (Q5_0/Q5_1 files start with 4 quantized
blocks). File format:
    u32 type id, u32 n_values, u32 n_bytes, raw block bytes, n_values float32
(all little-endian). Run with the venv described in tests/ref/README.md:
    python tests/ref/make_dequant_golden.py
"""
import os
import struct

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

out_dir = os.path.join(os.path.dirname(__file__), "..", "golden", "dequant")
os.makedirs(out_dir, exist_ok=True)
rng = np.random.default_rng(20261130)
for t in (T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q8_0):
    n = 128
    x = (rng.standard_normal(n) * rng.uniform(0.01, 3.0)).astype(np.float32)
    x[5] = 0.0  # exact zero and an outlier exercise rounding paths
    x[17] = 9.5
    raw = quants.quantize(x.reshape(1, n), t).reshape(-1).view(np.uint8)
    ref = quants.dequantize(raw.reshape(1, -1), t).reshape(-1).astype(np.float32)
    assert ref.shape[0] == n
    with open(os.path.join(out_dir, t.name + ".bin"), "wb") as f:
        f.write(struct.pack("<III", int(t), n, raw.nbytes))
        f.write(raw.tobytes())
        f.write(ref.astype("<f4").tobytes())
    print(t.name, raw.nbytes, "bytes")

# ---- Types gguf-py can only dequantize (k-quants), and Q5_0/Q5_1.
# Any bit pattern is a valid block, so the raw blocks are built from seeded
# random bytes (a second RNG: the outputs above stay byte-identical), with the
# fp16 scale fields and the sub-block scale bytes forced through extreme
# patterns; gguf.quants.dequantize is the independent reference. Q5_0/Q5_1
# also get blocks quantized from floats by gguf.quants.quantize first.
#   layout: bytes per block, fp16 field offsets, (start, end) of the sub-block
#   scale bytes (None: no such field), as in ggml's block_* structs.
K_LAYOUT = {
    T.Q5_0: (22, (0,), None),            # d, qh[4], qs[16]
    T.Q5_1: (24, (0, 2), None),          # d, m, qh[4], qs[16]
    T.Q2_K: (84, (80, 82), (0, 16)),     # scales[16], qs[64], d, dmin
    T.Q3_K: (110, (108,), (96, 108)),    # hmask[32], qs[64], scales[12], d
    T.Q4_K: (144, (0, 2), (4, 16)),      # d, dmin, scales[12], qs[128]
    T.Q5_K: (176, (0, 2), (4, 16)),      # d, dmin, scales[12], qh[32], qs[128]
    T.Q6_K: (210, (208,), (192, 208)),   # ql[128], qh[64], scales[16] (int8), d
}
# fp16 bit patterns per block (cycled over the fp16 fields): None = a random
# normal value; 0x7bff = 65504 (largest finite), 0x0001 = smallest subnormal.
HALF_PATTERNS = [
    (None, None), (0x7BFF, 0xFBFF), (0x0001, 0x8001), (0x0000, None),
    (None, 0x0000), (0xFBFF, 0x7BFF), (0x3C00, 0xBC00), (None, None),
]
# sub-block scale bytes per block: None = random; all 0xff (largest 6-bit
# scales and mins, -1 for Q6_K), all 0x00, alternating 0x7f/0x80 (Q6_K's
# +127/-128).
SCALE_PATTERNS = [None, 0xFF, 0x00, (0x7F, 0x80), None, 0xFF, None, (0x80, 0x7F)]

krng = np.random.default_rng(20261201)
for t, (bsz, half_off, sc_rng) in K_LAYOUT.items():
    nb = len(HALF_PATTERNS)
    blocks = krng.integers(0, 256, size=(nb, bsz), dtype=np.uint8)
    blocks[3, :] = 0xFF  # every quant at its maximum (and high bits set)
    blocks[4, :] = 0x00  # every quant at zero
    for b in range(nb):
        for k, off in enumerate(half_off):
            h = HALF_PATTERNS[b][k % 2]
            if h is None:
                h = int(np.float16(krng.standard_normal() * 0.05).view(np.uint16))
            blocks[b, off:off + 2] = (h & 0xFF, h >> 8)
        if sc_rng is not None:
            p = SCALE_PATTERNS[b]
            if p is None:
                blocks[b, sc_rng[0]:sc_rng[1]] = krng.integers(0, 256, sc_rng[1] - sc_rng[0], dtype=np.uint8)
            elif isinstance(p, tuple):
                blocks[b, sc_rng[0]:sc_rng[1]] = np.resize(np.array(p, dtype=np.uint8), sc_rng[1] - sc_rng[0])
            else:
                blocks[b, sc_rng[0]:sc_rng[1]] = p
    raw = blocks.reshape(-1)
    if t in (T.Q5_0, T.Q5_1):
        x = (krng.standard_normal(128) * krng.uniform(0.01, 3.0)).astype(np.float32)
        x[5], x[17], x[40] = 0.0, 9.5, -7.25
        q = quants.quantize(x.reshape(1, -1), t).reshape(-1).view(np.uint8)
        raw = np.concatenate([q, raw])
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    ref = quants.dequantize(raw.reshape(1, -1), t).reshape(-1).astype(np.float32)
    n = ref.shape[0]
    assert raw.nbytes == n // quants.GGML_QUANT_SIZES[t][0] * bsz
    assert np.all(np.isfinite(ref)), t.name
    with open(os.path.join(out_dir, t.name + ".bin"), "wb") as f:
        f.write(struct.pack("<III", int(t), n, raw.nbytes))
        f.write(raw.tobytes())
        f.write(ref.astype("<f4").tobytes())
    print(t.name, raw.nbytes, "bytes")
