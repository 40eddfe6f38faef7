#!/usr/bin/env python3
"""numpy_gemma3.py - an independent, plain-numpy forward pass for GGUF `gemma3` models.

The second reference for the gemma3 golden tests (the first is llama.cpp, see
make_gemma_golden.py). It extends numpy_qwen3.py (same per-head Q/K RMSNorm
before NEOX RoPE, same attention code) with what gemma3 adds, as llama.cpp's
`gemma3` architecture evaluates it:

    x0  = embd[tok] * sqrt(n_embd)
    a   = Wo . attn(...)                      Q/K norm, NEOX RoPE, GQA as in qwen3
    h   = x + rms(a) * g_post_attn            post-attention norm before the residual add
    f   = Wdown . (gelu(Wgate . rms(h) g_ffn) * (Wup . rms(h) g_ffn))
    out = h + rms(f) * g_post_ffw             post-FFN norm before the residual add
    logits = rms(x_L) g_out . embd^T          tied output, no soft-capping

- Norm weights are used as stored: the GGUF converter already added Gemma's +1.
- Attention scale 1/sqrt(key_length) (query_pre_attn_scalar = head_dim; llama.cpp
  uses sqrt(n_embd / n_head) only for the 27B model).
- Sliding window: layer il is local when il % 6 < 5 (llama.cpp set_swa_pattern(6));
  a query at position p sees keys at p - window < pos <= p, window =
  `gemma3.attention.sliding_window` (512). Layers 5, 11, 17 are global.
- RoPE base: `gemma3.rope.freq_base` (1e6) on global layers, 10000 on local
  layers (a constant in llama.cpp, not in the file); no RoPE scaling for 270m.
- gelu is the tanh approximation. llama.cpp's CPU gelu goes through an fp16
  lookup table (input and output rounded to fp16); this reference computes it
  exactly in fp64, which accounts for part of the llama.cpp-vs-numpy gap.

CLI as numpy_qwen3.py:
    python3 numpy_gemma3.py --model gemma-3-270m-q4_k_m.gguf --tokens 2 818 5279 529 7001 563
"""
import numpy as np

from numpy_qwen3 import NumpyQwen3, _field, main

SWA_PATTERN = 6
SWA_ROPE_BASE = 10000.0


class NumpyGemma3(NumpyQwen3):
    ARCH = "gemma3"
    LAYER_TENSORS = NumpyQwen3.LAYER_TENSORS + ("post_attention_norm", "post_ffw_norm")

    def setup(self):
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)
        self.window = _field(self.reader, "gemma3.attention.sliding_window")
        self.window = int(self.window) if self.window else None
        if _field(self.reader, "gemma3.final_logit_softcapping") or \
                _field(self.reader, "gemma3.attn_logit_softcapping"):
            raise ValueError("numpy_gemma3: soft-capping not supported")
        self.embd_scale = np.float32(np.sqrt(np.float32(self.n_embd)))

    def is_local(self, li):
        return self.window is not None and li % SWA_PATTERN < SWA_PATTERN - 1

    def rope_base_of(self, li):
        return SWA_ROPE_BASE if self.is_local(li) else self.rope_base

    def window_of(self, li):
        return self.window if self.is_local(li) else None

    def embed(self, tokens):
        return self.tok_embd[tokens] * self.dtype.type(self.embd_scale)

    # Set to True to emulate ggml's CPU gelu (fp16 lookup table): used only to
    # explain the llama.cpp-vs-numpy gap, never for the golden data.
    gelu_f16 = False

    def act(self, g):
        if self.gelu_f16:
            x = g.astype(np.float16).astype(np.float32)
            y = np.float32(0.5) * x * (np.float32(1.0) + np.tanh(np.float32(0.7978845608028654) * x * (
                np.float32(1.0) + np.float32(0.044715) * x * x)))
            y = y.astype(np.float16).astype(self.dtype)
            return np.where(g <= -10.0, 0.0, np.where(g >= 10.0, g, y)).astype(self.dtype)
        return 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g * g * g)))

    def _block(self, li, L, x, pos, cache):
        h = self._rms(x, L["attn_norm"])
        a = self._attention(li, L, h, pos, cache)
        x = x + self._rms(a, L["post_attention_norm"])
        h = self._rms(x, L["ffn_norm"])
        f = (self.act(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        return x + self._rms(f, L["post_ffw_norm"])


if __name__ == "__main__":
    main(NumpyGemma3)
