#!/usr/bin/env python3
"""numpy_llama.py - an independent, plain-numpy forward pass for GGUF `llama` models.

This is the second reference for libhsq's golden tests (the first is llama.cpp
through llama-cpp-python, see make_golden.py). It shares no code with either:
weights are dequantized with gguf.quants.dequantize (the `gguf` package,
0.19.0) and the transformer is written out below in a few dozen lines of
numpy, in float64 by default (float32 with --dtype float32). Unlike llama.cpp's
CPU path, which quantizes activations to Q8 before every matmul with a
quantized weight, nothing here is quantized beyond the stored weights, so these
logits are what an exact implementation of the quantized model computes; an
fp32 C implementation should land within float32 rounding of them.

The llama block (as llama.cpp's `llama` architecture evaluates it):
    h   = x + Wo . attn(RoPE(Wq . rms(x)), RoPE(Wk . rms(x)), Wv . rms(x))
    out = h + Wdown . (silu(Wgate . rms(h)) * (Wup . rms(h)))
rms(x) = x / sqrt(mean(x^2) + eps) * g (eps from metadata). RoPE is the NORM
style (LLAMA_ROPE_TYPE_NORM): it rotates adjacent pairs (2i, 2i+1) by
pos * base^(-2i/d); the GGUF converter permuted Wq/Wk rows so that this equals
Hugging Face's rotate-half convention. Attention is causal, scaled by
1/sqrt(head_dim), grouped-query: query head h reads KV head h // (n_head /
n_head_kv). The output projection is `output.weight`, or the token embedding
when the file has none (tied embeddings, as in SmolLM2).

Library use:
    m = NumpyLlama(path)           # dequantizes every weight (~0.6 GB for 135M at f32)
    cache = m.new_cache()
    logits = m.forward(tokens, cache)            # [n, n_vocab], appends to the cache
CLI:
    python3 numpy_llama.py --model M.gguf --tokens 1 2 3 [--greedy 8]
"""
import argparse
import sys

import numpy as np

try:
    import gguf
    from gguf.quants import dequantize
except ImportError:  # pragma: no cover
    sys.exit("numpy_llama.py: needs the gguf package (pip install gguf==0.19.0)")


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


class NumpyLlama:
    def __init__(self, path, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        r = gguf.GGUFReader(path)
        arch = _field(r, "general.architecture")
        if arch != "llama":
            raise ValueError(f"numpy_llama: architecture {arch!r} is not 'llama'")
        p = "llama."
        self.n_layer = int(_field(r, p + "block_count"))
        self.n_embd = int(_field(r, p + "embedding_length"))
        self.n_head = int(_field(r, p + "attention.head_count"))
        self.n_head_kv = int(_field(r, p + "attention.head_count_kv", self.n_head))
        self.eps = float(_field(r, p + "attention.layer_norm_rms_epsilon"))
        self.rope_base = float(_field(r, p + "rope.freq_base", 10000.0))
        self.head_dim = self.n_embd // self.n_head
        self.n_rot = int(_field(r, p + "rope.dimension_count", self.head_dim))
        if self.n_rot != self.head_dim:
            raise ValueError("numpy_llama: partial rotary dimension not supported")
        tensors = {t.name: t for t in r.tensors}

        def w(name):
            t = tensors[name]
            a = dequantize(np.asarray(t.data), t.tensor_type)
            # GGUF shape [ne0, ne1] is numpy [ne1, ne0]: rows are output features.
            a = np.asarray(a, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
            return a.astype(self.dtype, copy=False)

        self.tok_embd = w("token_embd.weight")
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = w("output_norm.weight")
        self.output = w("output.weight") if "output.weight" in tensors else self.tok_embd
        self.layers = []
        for i in range(self.n_layer):
            b = f"blk.{i}."
            self.layers.append({k: w(b + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        d = self.head_dim
        self.inv_freq = self.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)

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

    def _rope(self, x, pos):
        # x: [n, heads, d]; rotate adjacent pairs (2i, 2i+1) (ROPE_TYPE_NORM)
        ang = pos[:, None].astype(np.float64) * self.inv_freq[None, :]     # [n, d/2]
        c = np.cos(ang).astype(self.dtype)[:, None, :]
        s = np.sin(ang).astype(self.dtype)[:, None, :]
        x0 = x[..., 0::2]
        x1 = x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def forward(self, tokens, cache, all_logits=True):
        """Evaluate tokens at positions cache['n']..; returns logits [n, n_vocab]
        (or [n_vocab] for the last token if all_logits is False)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        n_past = cache["n"]
        pos = np.arange(n_past, n_past + n)
        x = self.tok_embd[tokens].copy()
        H, KV, d = self.n_head, self.n_head_kv, self.head_dim
        grp = H // KV
        scale = 1.0 / np.sqrt(d)
        # causal mask over [n, n_past + n]
        kpos = np.arange(n_past + n)
        mask = np.where(kpos[None, :] <= pos[:, None], 0.0, -np.inf).astype(self.dtype)
        for li, L in enumerate(self.layers):
            h = self._rms(x, L["attn_norm"])
            q = (h @ L["attn_q"].T).reshape(n, H, d)
            k = (h @ L["attn_k"].T).reshape(n, KV, d)
            v = (h @ L["attn_v"].T).reshape(n, KV, d)
            q = self._rope(q, pos)
            k = self._rope(k, pos)
            K = np.concatenate([cache["k"][li], k], axis=0)
            V = np.concatenate([cache["v"][li], v], axis=0)
            cache["k"][li], cache["v"][li] = K, V
            att_out = np.empty((n, H, d), self.dtype)
            for hh in range(H):
                kv = hh // grp
                s = (q[:, hh, :] @ K[:, kv, :].T) * scale + mask      # [n, T]
                s = s - s.max(axis=1, keepdims=True)
                p = np.exp(s)
                p /= p.sum(axis=1, keepdims=True)
                att_out[:, hh, :] = p @ V[:, kv, :]
            x = x + att_out.reshape(n, H * d) @ L["attn_output"].T
            h = self._rms(x, L["ffn_norm"])
            g = h @ L["ffn_gate"].T
            u = h @ L["ffn_up"].T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ L["ffn_down"].T
        cache["n"] = n_past + n
        if not all_logits:
            x = x[-1:]
        logits = self._rms(x, self.out_norm) @ self.output.T
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, nargs="+", required=True)
    ap.add_argument("--greedy", type=int, default=0, help="greedy tokens to generate")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    a = ap.parse_args()
    m = NumpyLlama(a.model, dtype=a.dtype)
    toks, gaps, logits = m.greedy(a.tokens, a.greedy)
    top = np.argsort(-logits, kind="stable")[:10]
    print("top10", " ".join(f"{int(t)}:{logits[t]:.4f}" for t in top))
    if a.greedy:
        print("greedy", " ".join(map(str, toks)))


if __name__ == "__main__":
    main()
