#!/usr/bin/env python3
"""make_dequant_golden.py - reference dequantization vectors for the unit
tests, from the gguf Python package (llama.cpp's gguf-py, an independent
implementation of the ggml block formats).

For each type it quantizes 4 blocks of seeded random floats with
gguf.quants.quantize, then dequantizes them with gguf.quants.dequantize,
and writes tests/golden/dequant/<TYPE>.bin:
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
