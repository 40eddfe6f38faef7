#!/usr/bin/env python3
"""numpy_qwen3.py - an independent, plain-numpy forward pass for GGUF `qwen3` models.

The second reference for the qwen3 golden tests (the first is llama.cpp through
llama-cpp-python, see make_qwen3_golden.py); written in the manner of
numpy_llama.py and sharing no code with libhsq or llama.cpp. Weights are
dequantized with gguf.quants.dequantize (the `gguf` package, 0.19.0); the
transformer is written out below in numpy, in float64 by default. Nothing is
quantized beyond the stored weights (llama.cpp's CPU path quantizes
activations to Q8 before matmuls with quantized weights and keeps an f16 KV
cache), so these logits are what an exact implementation computes.

The qwen3 block (as llama.cpp's `qwen3` architecture evaluates it):
    q_h = RoPE(qn * rms(Wq_h . rms(x) * g_attn))    per head h, before RoPE
    k_h = RoPE(kn * rms(Wk_h . rms(x) * g_attn))
    h   = x + Wo . attn(q, k, Wv . rms(x) * g_attn)
    out = h + Wdown . (silu(Wgate . rms(h) g_ffn) * (Wup . rms(h) g_ffn))
rms(v) = v / sqrt(mean(v^2) + eps), eps from metadata; the Q/K norms run over
head_dim with the weights attn_q_norm / attn_k_norm ([head_dim] each). head_dim
is `qwen3.attention.key_length` (n_head * head_dim need not equal n_embd).
RoPE is the NEOX style (LLAMA_ROPE_TYPE_NEOX): it rotates the pairs (i, i + d/2)
by pos * base^(-2i/d), base = `qwen3.rope.freq_base`. Attention is causal,
scaled by 1/sqrt(head_dim), grouped-query (query head h reads KV head
h // (n_head / n_head_kv)). No biases. The output projection is
`output.weight`, or the token embedding when the file has none (tied).

Library use:
    m = NumpyQwen3(path)
    cache = m.new_cache()
    logits = m.forward(tokens, cache)            # [n, n_vocab], appends to the cache
CLI:
    python3 numpy_qwen3.py --model M.gguf --tokens 9707 11 847 [--greedy 8]
"""
import argparse
import sys

import numpy as np

try:
    import gguf
    from gguf.quants import dequantize
except ImportError:  # pragma: no cover
    sys.exit("numpy_qwen3.py: needs the gguf package (pip install gguf==0.19.0)")


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


class NumpyQwen3:
    ARCH = "qwen3"
    LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                     "attn_q_norm", "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")

    def __init__(self, path, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        r = gguf.GGUFReader(path)
        self.reader = r
        arch = _field(r, "general.architecture")
        if arch != self.ARCH:
            raise ValueError(f"numpy_{self.ARCH}: architecture {arch!r} is not {self.ARCH!r}")
        p = self.ARCH + "."
        self.n_layer = int(_field(r, p + "block_count"))
        self.n_embd = int(_field(r, p + "embedding_length"))
        self.n_head = int(_field(r, p + "attention.head_count"))
        self.n_head_kv = int(_field(r, p + "attention.head_count_kv", self.n_head))
        self.eps = float(_field(r, p + "attention.layer_norm_rms_epsilon"))
        self.rope_base = float(_field(r, p + "rope.freq_base", 10000.0))
        self.head_dim = int(_field(r, p + "attention.key_length", self.n_embd // self.n_head))
        vdim = int(_field(r, p + "attention.value_length", self.head_dim))
        if vdim != self.head_dim:
            raise ValueError(f"numpy_{self.ARCH}: key_length != value_length not supported")
        self.n_rot = int(_field(r, p + "rope.dimension_count", self.head_dim))
        if self.n_rot != self.head_dim:
            raise ValueError(f"numpy_{self.ARCH}: partial rotary dimension not supported")
        tensors = {t.name: t for t in r.tensors}
        self._tensors = tensors

        def w(name):
            t = tensors[name]
            a = dequantize(np.asarray(t.data), t.tensor_type)
            # GGUF shape [ne0, ne1] is numpy [ne1, ne0]: rows are output features.
            a = np.asarray(a, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
            return a.astype(self.dtype, copy=False)

        self._w = w
        self.tok_embd = w("token_embd.weight")
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = w("output_norm.weight")
        self.output = w("output.weight") if "output.weight" in tensors else self.tok_embd
        self.layers = []
        for i in range(self.n_layer):
            b = f"blk.{i}."
            self.layers.append({k: w(b + k + ".weight") for k in self.LAYER_TENSORS})
        self.setup()

    # ---------------------------------------------------------------- hooks
    def setup(self):
        """Per-architecture constants (subclasses extend)."""
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)

    def rope_base_of(self, li):
        return self.rope_base

    def window_of(self, li):
        """Sliding window (keys at distance >= window are masked) or None."""
        return None

    def embed(self, tokens):
        return self.tok_embd[tokens].copy()

    def act(self, g):
        return g / (1.0 + np.exp(-g))   # silu

    # ---------------------------------------------------------------- pieces
    def new_cache(self):
        return {"k": [np.zeros((0, self.n_head_kv, self.head_dim), self.dtype)
                      for _ in range(self.n_layer)],
                "v": [np.zeros((0, self.n_head_kv, self.head_dim), self.dtype)
                      for _ in range(self.n_layer)],
                "n": 0}

    def _rms(self, x, g):
        x64 = x.astype(np.float64)
        s = np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + self.eps)
        return (x64 / s).astype(self.dtype) * g

    def _rope(self, x, pos, base):
        # x: [n, heads, d]; NEOX: rotate the pairs (i, i + d/2)
        d = self.head_dim
        inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)          # [d/2]
        ang = pos[:, None].astype(np.float64) * inv_freq[None, :]             # [n, d/2]
        c = np.cos(ang).astype(self.dtype)[:, None, :]
        s = np.sin(ang).astype(self.dtype)[:, None, :]
        x0 = x[..., : d // 2]
        x1 = x[..., d // 2:]
        return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)

    def _attention(self, li, L, h, pos, cache):
        n = h.shape[0]
        H, KV, d = self.n_head, self.n_head_kv, self.head_dim
        q = (h @ L["attn_q"].T).reshape(n, H, d)
        k = (h @ L["attn_k"].T).reshape(n, KV, d)
        v = (h @ L["attn_v"].T).reshape(n, KV, d)
        q = self._rms(q, L["attn_q_norm"])
        k = self._rms(k, L["attn_k_norm"])
        base = self.rope_base_of(li)
        q = self._rope(q, pos, base)
        k = self._rope(k, pos, base)
        K = np.concatenate([cache["k"][li], k], axis=0)
        V = np.concatenate([cache["v"][li], v], axis=0)
        cache["k"][li], cache["v"][li] = K, V
        win = self.window_of(li)
        lo = 0 if win is None else max(0, int(pos[0]) - win + 1)   # older keys are masked anyway
        K, V = K[lo:], V[lo:]
        kpos = np.arange(lo, lo + K.shape[0])
        visible = kpos[None, :] <= pos[:, None]
        if win is not None:
            visible &= (pos[:, None] - kpos[None, :]) < win
        mask = np.where(visible, 0.0, -np.inf).astype(self.dtype)
        grp = H // KV
        att_out = np.empty((n, H, d), self.dtype)
        for hh in range(H):
            kv = hh // grp
            s = (q[:, hh, :] @ K[:, kv, :].T) * self.attn_scale + mask      # [n, T]
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            att_out[:, hh, :] = p @ V[:, kv, :]
        return att_out.reshape(n, H * d) @ L["attn_output"].T

    def _block(self, li, L, x, pos, cache):
        h = self._rms(x, L["attn_norm"])
        x = x + self._attention(li, L, h, pos, cache)
        h = self._rms(x, L["ffn_norm"])
        g = h @ L["ffn_gate"].T
        u = h @ L["ffn_up"].T
        return x + (self.act(g) * u) @ L["ffn_down"].T

    def final(self, x):
        return self._rms(x, self.out_norm) @ self.output.T

    def forward(self, tokens, cache, all_logits=True):
        """Evaluate tokens at positions cache['n']..; returns logits [n, n_vocab]
        (or [n_vocab] for the last token if all_logits is False)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        n_past = cache["n"]
        pos = np.arange(n_past, n_past + n)
        x = self.embed(tokens)
        for li, L in enumerate(self.layers):
            x = self._block(li, L, x, pos, cache)
        cache["n"] = n_past + n
        if not all_logits:
            x = x[-1:]
        logits = self.final(x)
        return logits if all_logits else logits[0]

    def greedy(self, prompt, n_gen, cache=None, chunk=512):
        """Greedy continuation: returns (tokens, per-step top-2 gap, last-prompt logits)."""
        cache = cache if cache is not None else self.new_cache()
        logits = None
        for i in range(0, len(prompt), chunk):
            logits = self.forward(prompt[i:i + chunk], cache, all_logits=False)
        first = logits.copy()
        out, gaps = [], []
        for _ in range(n_gen):
            top2 = np.argsort(-logits, kind="stable")[:2]
            out.append(int(top2[0]))
            gaps.append(float(logits[top2[0]] - logits[top2[1]]))
            logits = self.forward([out[-1]], cache, all_logits=False)
        return out, gaps, first


def main(cls=NumpyQwen3):
    ap = argparse.ArgumentParser(description=sys.modules[cls.__module__].__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, nargs="+", required=True)
    ap.add_argument("--greedy", type=int, default=0, help="greedy tokens to generate")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    a = ap.parse_args()
    m = cls(a.model, dtype=a.dtype)
    toks, gaps, logits = m.greedy(a.tokens, a.greedy)
    top = np.argsort(-logits, kind="stable")[:10]
    print("top10", " ".join(f"{int(t)}:{logits[t]:.4f}" for t in top))
    if a.greedy:
        print("greedy", " ".join(map(str, toks)))


if __name__ == "__main__":
    main()
