#!/usr/bin/env python3
"""dequant_gguf.py - write an all-F32 copy of a GGUF model (same metadata).

Why: llama.cpp's CPU path quantizes activations to Q8 before each matmul with a
quantized weight, so its logits for a Q4_1 model differ from an exact fp32
evaluation by up to ~1 logit. On an all-F32 copy of the same weights llama.cpp
computes in fp32 throughout, which lets make_golden.py check numpy_llama.py
(and so the tolerance the C tests use) against llama.cpp itself: the two must
then agree to float32 rounding. The copy is ~4x the size of a Q4 file; it is a
scratch file, never committed.

    python3 dequant_gguf.py IN.gguf OUT.gguf
"""
import sys

import numpy as np
import gguf
from gguf.quants import dequantize


def convert(src, dst):
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = f.types[0]
        val = f.contents()
        if key == "general.file_type":
            val = 0  # LLAMA_FTYPE_ALL_F32
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, vtype, sub_type=f.types[-1])
        else:
            w.add_key_value(key, val, vtype)
    for t in r.tensors:
        a = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        a = a.reshape([int(d) for d in reversed(t.shape)])
        w.add_tensor(t.name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: dequant_gguf.py IN.gguf OUT.gguf")
    convert(sys.argv[1], sys.argv[2])
