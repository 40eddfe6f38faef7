#!/usr/bin/env python3
"""make_qwen3_gguf.py - write small synthetic `qwen3` GGUF models for libhsq's tests.

No real Qwen3 weights are available to the project, so the qwen3 code path is
tested on tiny models with random weights and the real Qwen3 tokenizer (its
vocabulary, merges and added tokens are read in place from
../shared/tokenizers/qwen3/tokenizer.json: nothing of it is committed). The
models are generated, never committed; the golden data computed from them
(tests/golden/qwen3/, see make_qwen3_golden.py) is.

Needs python3 with numpy and gguf (pip install numpy gguf==0.19.0); nothing
else. The files are reproducible bit for bit: weights come from PCG64 raw
64-bit draws (the bit generator's output is fixed by its algorithm; numpy's
distribution functions are not promised stable across versions), and every
quantizer used is exact integer/float arithmetic without summations.
tests/golden/qwen3/models.tsv records the sha256 of every variant; the script
checks what it wrote against it (unless --no-verify) and a C test can do the
same.

    python3 tests/ref/make_qwen3_gguf.py [--out DIR] [--tokenizer DIR] [VARIANT ...]

Defaults: --out <repo>/build/test-models, --tokenizer $HSQ_SHARED/tokenizers/qwen3
(else <repo>/../shared/tokenizers/qwen3), all variants. A file already present
with the recorded sha256 is left alone. Exit status: 0 done; 1 error (including
a sha256 mismatch); 77 prerequisites missing (numpy, gguf or the tokenizer
directory), so a test harness can SKIP, loudly.

Variants (all: 151,936-entry vocabulary = 151,643 BPE tokens + 26 added tokens
+ 267 [PAD] entries, as in real Qwen3 GGUF files; qwen2 pre-tokenizer; per-head
RMSNorm on Q and K before NEOX RoPE; no biases; n_head * head_dim != n_embd):
    qwen3-a  tied output, n_embd 128, 4 q / 2 kv heads, head_dim 64, ffn 384,
             3 layers, rope base 1e6, eps 1e-6; token_embd Q8_0; layers mix
             F32 F16 BF16 Q8_0 Q4_0 Q4_1
    qwen3-b  untied output, n_embd 128, 4 q / 2 kv heads, head_dim 128, ffn 256,
             2 layers, rope base 1e4, eps 1e-5; token_embd Q4_1, output Q8_0;
             layers F16 / F32 / Q4_0 / Q4_1 / Q8_0
    qwen3-k  tied output, n_embd 256, 4 q / 2 kv heads, head_dim 64, ffn 512,
             2 layers, rope base 1e6, eps 1e-6; token_embd Q6_K, layers Q4_K
             and Q6_K (K-quants need rows that are multiples of 256)
"""
import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS_TSV = os.path.join(REPO, "tests", "golden", "qwen3", "models.tsv")
EXIT_SKIP = 77

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
    from gguf import quants
except ImportError as e:  # pragma: no cover
    print(f"make_qwen3_gguf: SKIP: {e} (pip install numpy gguf==0.19.0)", file=sys.stderr)
    sys.exit(EXIT_SKIP)

N_VOCAB = 151936          # padded like the real Qwen3 checkpoints (config.json vocab_size)
BOS_ID = 151643           # <|endoftext|>
EOS_ID = 151645           # <|im_end|>
PAD_ID = 151643

F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K = (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0,
                                                 T.Q4_1, T.Q4_K, T.Q6_K)
MATS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

VARIANTS = {
    "qwen3-a": dict(
        seed=0x5157454e3341, n_embd=128, n_head=4, n_head_kv=2, head_dim=64, n_ff=384,
        rope_base=1000000.0, eps=1e-6, tied=True, embd=Q8_0, output=None, ftype=7,
        layers=[  # attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down
            (F32, F16, BF16, Q8_0, Q4_0, Q4_1, F16),
            (Q4_0, Q4_1, Q8_0, F16, BF16, F32, Q8_0),
            (Q8_0, Q8_0, Q8_0, Q8_0, Q8_0, Q8_0, Q8_0),
        ]),
    "qwen3-b": dict(
        seed=0x5157454e3342, n_embd=128, n_head=4, n_head_kv=2, head_dim=128, n_ff=256,
        rope_base=10000.0, eps=1e-5, tied=False, embd=Q4_1, output=Q8_0, ftype=1,
        layers=[
            (F16, F16, F16, F16, F16, F16, F16),
            (Q4_0, Q4_0, Q4_1, Q4_1, F32, F16, Q8_0),
        ]),
    "qwen3-k": dict(
        seed=0x5157454e334b, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512,
        rope_base=1000000.0, eps=1e-6, tied=True, embd=Q6_K, output=None, ftype=15,
        layers=[
            (Q4_K, Q4_K, Q6_K, Q4_K, Q4_K, Q4_K, Q6_K),
            (Q4_K, Q4_K, Q6_K, Q4_K, Q4_K, Q4_K, Q6_K),
        ]),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ weights
class Rng:
    """Uniform floats from PCG64's raw 64-bit output (stable by construction)."""

    def __init__(self, seed):
        self.bg = np.random.PCG64(seed)

    def uniform(self, n, lo, hi):
        raw = self.bg.random_raw(n)
        u = (raw >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)  # [0, 1)
        return lo + (hi - lo) * u

    def weights(self, shape, std):
        """float32 array of `shape` (numpy order: rows = output features),
        uniform with the given standard deviation."""
        a = np.sqrt(3.0) * std
        return self.uniform(int(np.prod(shape)), -a, a).astype(np.float32).reshape(shape)


# ------------------------------------------------------------------ K-quants
# gguf 0.19 can dequantize Q4_K / Q6_K but not quantize them. These encoders
# are deliberately simple (no iterative scale search as in ggml-quants.c): the
# blocks are valid and decode through gguf.quants.dequantize (checked below),
# and the tests compare against that dequantization, not against the floats
# they came from.
def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(x):
    """x: float32 [rows, n] with n % 256 == 0 -> uint8 [rows, n/256*144]."""
    rows, n = x.shape
    b = x.reshape(-1, 8, 32).astype(np.float32)             # [nb, sub, 32]
    mn = np.minimum(b.min(axis=2), 0.0)                      # [nb, 8]
    mx = b.max(axis=2)
    scale = (mx - mn) / 15.0                                 # per-sub-block step
    mins = -mn                                               # >= 0
    d = _f16(scale.max(axis=1) / 63.0)                       # [nb]
    dmin = _f16(mins.max(axis=1) / 63.0)
    d32 = d.astype(np.float32)[:, None]
    dm32 = dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.round(scale / d32), 0).clip(0, 63).astype(np.uint8)
        m = np.where(dm32 > 0, np.round(mins / dm32), 0).clip(0, 63).astype(np.uint8)
        step = (d32 * sc.astype(np.float32))[:, :, None]        # [nb, 8, 1]
        off = (dm32 * m.astype(np.float32))[:, :, None]
        q = np.where(step > 0, np.round((b + off) / step), 0).clip(0, 15).astype(np.uint8)
    nb = b.shape[0]
    scales = np.zeros((nb, 12), np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    q = q.reshape(nb, 4, 2, 32)                              # [nb, chunk, lo/hi, 32]
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.reshape(nb, 1).view(np.uint8), dmin.reshape(nb, 1).view(np.uint8),
                          scales, qs], axis=1)
    return out.reshape(rows, -1)


def quantize_q6_k(x):
    """x: float32 [rows, n] with n % 256 == 0 -> uint8 [rows, n/256*210]."""
    rows, n = x.shape
    b = x.reshape(-1, 16, 16).astype(np.float32)            # [nb, sub, 16]
    nb = b.shape[0]
    s = np.abs(b).max(axis=2) / 31.0                         # [nb, 16]
    d = _f16(s.max(axis=1) / 127.0)
    d32 = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.round(s / d32), 0).clip(-128, 127).astype(np.int8)
        step = (d32 * sc.astype(np.float32))[:, :, None]
        q = np.where(step != 0, np.round(b / step), 0).clip(-32, 31)
    q = (q + 32).astype(np.uint8).reshape(nb, 2, 4, 32)      # [nb, half, k, l]: value 128h + 32k + l
    ql = np.concatenate([(q[:, :, 0] & 0xF) | ((q[:, :, 2] & 0xF) << 4),
                         (q[:, :, 1] & 0xF) | ((q[:, :, 3] & 0xF) << 4)], axis=2)  # [nb, 2, 64]
    qh = ((q[:, :, 0] >> 4) | ((q[:, :, 1] >> 4) << 2) | ((q[:, :, 2] >> 4) << 4)
          | ((q[:, :, 3] >> 4) << 6))                        # [nb, 2, 32]
    out = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8),
                          d.reshape(nb, 1).view(np.uint8)], axis=1)
    return out.reshape(rows, -1)


def encode(a, qtype):
    """float32 [rows, n] -> (array for GGUFWriter.add_tensor, raw_dtype)."""
    if qtype == F32:
        return a.astype(np.float32), None
    if qtype == F16:
        return a.astype(np.float16), None
    if qtype == Q4_K:
        return quantize_q4_k(a), qtype
    if qtype == Q6_K:
        return quantize_q6_k(a), qtype
    return quants.quantize(a, qtype), qtype


def selfcheck_kquants():
    """The K-quant encoders must round-trip through gguf's decoder."""
    r = Rng(20261130)
    x = r.weights((4, 512), 1.0)
    x[0, :256] = 0.0            # an all-zero block
    x[1, 7] = 9.0               # an outlier
    x[2] = np.abs(x[2])         # all non-negative (Q4_K min 0)
    for qt, enc, tol in ((Q4_K, quantize_q4_k, 0.25), (Q6_K, quantize_q6_k, 0.06)):
        raw = enc(x)
        y = quants.dequantize(raw, qt).reshape(x.shape)
        err = np.abs(y - x).max()
        rel = np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2))
        if not (np.all(np.isfinite(y)) and rel < tol):
            raise SystemExit(f"make_qwen3_gguf: {qt.name} encoder self-check failed "
                             f"(max err {err:.3g}, rel rms {rel:.3g})")


# ------------------------------------------------------------------ tokenizer
def load_tokenizer(tokdir):
    path = os.path.join(tokdir, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    model = tj["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"make_qwen3_gguf: {path}: not a BPE tokenizer")
    vocab = model["vocab"]
    tokens = [None] * N_VOCAB
    types = [int(gguf.TokenType.NORMAL)] * N_VOCAB
    for tok, i in vocab.items():
        tokens[i] = tok
    for at in tj["added_tokens"]:
        i, tok = at["id"], at["content"]
        tokens[i] = tok
        # As llama.cpp's convert_hf_to_gguf.py classifies added tokens: special
        # ones, and those that look special (<|...|>), are CONTROL (parsed only
        # when special parsing is on); the rest (<think>, <tool_call>, ...)
        # are USER_DEFINED (always matched as a whole).
        looks = tok.startswith("<|") and tok.endswith("|>")
        types[i] = int(gguf.TokenType.CONTROL if (at["special"] or looks)
                       else gguf.TokenType.USER_DEFINED)
    for i in range(N_VOCAB):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types[i] = int(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


# ------------------------------------------------------------------ model
def build(name, cfg, tok, path):
    tokens, types, merges = tok
    r = Rng(cfg["seed"])
    E, H, KV, D, FF = cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"], cfg["head_dim"], cfg["n_ff"]
    L = len(cfg["layers"])
    w = gguf.GGUFWriter(path, "qwen3")
    w.add_name(f"hsq synthetic {name}")
    w.add_description("random weights with the Qwen3 tokenizer, for libhsq tests only "
                      "(tests/ref/make_qwen3_gguf.py)")
    w.add_context_length(40960)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_freq_base(cfg["rope_base"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_file_type(cfg["ftype"])
    w.add_quantization_version(2)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_pad_token_id(PAD_ID)
    w.add_add_bos_token(False)

    def add(tname, a, qtype):
        data, raw = encode(a, qtype)
        if raw is None:
            w.add_tensor(tname, data)
        else:
            w.add_tensor(tname, data, raw_dtype=raw)

    # Scales: the residual stream starts at the embedding (std 0.5) and every
    # block adds contributions of std ~0.7, so the tied output is not
    # dominated by the input token's own embedding; Q/K norm gains up to 2.5
    # make attention peaked enough for RoPE errors to show in the logits.
    add("token_embd.weight", r.weights((N_VOCAB, E), 0.5), cfg["embd"])
    for li, lt in enumerate(cfg["layers"]):
        b = f"blk.{li}."
        add(b + "attn_norm.weight", r.uniform(E, 0.6, 1.4).astype(np.float32), F32)
        add(b + "attn_q_norm.weight", r.uniform(D, 0.5, 2.5).astype(np.float32), F32)
        add(b + "attn_k_norm.weight", r.uniform(D, 0.5, 2.5).astype(np.float32), F32)
        add(b + "ffn_norm.weight", r.uniform(E, 0.6, 1.4).astype(np.float32), F32)
        shapes = {"attn_q": (H * D, E), "attn_k": (KV * D, E), "attn_v": (KV * D, E),
                  "attn_output": (E, H * D), "ffn_gate": (FF, E), "ffn_up": (FF, E),
                  "ffn_down": (E, FF)}
        stds = {"attn_q": 1.0 / np.sqrt(E), "attn_k": 1.0 / np.sqrt(E), "attn_v": 1.0 / np.sqrt(E),
                "attn_output": 0.7 / np.sqrt(H * D), "ffn_gate": 1.0 / np.sqrt(E),
                "ffn_up": 1.0 / np.sqrt(E), "ffn_down": 1.4 / np.sqrt(FF)}
        for m, qt in zip(MATS, lt):
            add(b + m + ".weight", r.weights(shapes[m], stds[m]), qt)
    # Output norm gains of both signs: with tied embeddings and positive gains
    # the logit of the current token (x . E_t with x ~ E_t) dominates and
    # greedy decoding repeats the last token forever.
    add("output_norm.weight", r.uniform(E, -1.2, 1.4).astype(np.float32), F32)
    if not cfg["tied"]:
        add("output.weight", r.weights((N_VOCAB, E), 0.5), cfg["output"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def read_manifest():
    shas = {}
    if os.path.exists(MODELS_TSV):
        for line in open(MODELS_TSV, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            f = line.rstrip("\n").split("\t")
            shas[f[0]] = f[2]
    return shas


def main():
    ap = argparse.ArgumentParser(description="write small synthetic qwen3 GGUF models for the tests")
    ap.add_argument("variants", nargs="*", help=f"subset of {', '.join(VARIANTS)} (default all)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "test-models"))
    ap.add_argument("--tokenizer", default=None, help="directory with the Qwen3 tokenizer.json")
    ap.add_argument("--force", action="store_true", help="rewrite files even when present and valid")
    ap.add_argument("--no-verify", action="store_true", help="do not compare with models.tsv")
    ap.add_argument("--write-manifest", action="store_true",
                    help="(re)write tests/golden/qwen3/models.tsv from the files written")
    a = ap.parse_args()
    names = a.variants or list(VARIANTS)
    for n in names:
        if n not in VARIANTS:
            ap.error(f"unknown variant {n!r} (known: {', '.join(VARIANTS)})")
    tokdir = a.tokenizer
    if tokdir is None:
        shared = os.environ.get("HSQ_SHARED") or os.path.join(REPO, "..", "shared")
        tokdir = os.path.join(shared, "tokenizers", "qwen3")
    if not os.path.isfile(os.path.join(tokdir, "tokenizer.json")):
        log(f"make_qwen3_gguf: SKIP: {tokdir}/tokenizer.json not found (use --tokenizer DIR or HSQ_SHARED)")
        return EXIT_SKIP
    shas = read_manifest()
    os.makedirs(a.out, exist_ok=True)
    selfcheck_kquants()
    tok = None
    written = []
    for n in names:
        path = os.path.join(a.out, n + ".gguf")
        want = shas.get(n)
        if not a.force and want and os.path.exists(path) and sha256_file(path) == want:
            log(f"{n}: {path} present and verified")
            written.append((n, path))
            continue
        if tok is None:
            tok = load_tokenizer(tokdir)
        tmp = f"{path}.tmp.{os.getpid()}"
        build(n, VARIANTS[n], tok, tmp)
        got = sha256_file(tmp)
        if want and not a.no_verify and not a.write_manifest and got != want:
            os.unlink(tmp)
            log(f"make_qwen3_gguf: {n}: sha256 {got} differs from {want} in {MODELS_TSV} "
                "(different gguf/numpy version or tokenizer?); golden data would not apply")
            return 1
        os.replace(tmp, path)
        log(f"{n}: wrote {path} ({os.path.getsize(path)} bytes)")
        written.append((n, path))
    if a.write_manifest:
        rows = {}
        for line in (open(MODELS_TSV, encoding="utf-8") if os.path.exists(MODELS_TSV) else []):
            if not line.startswith("#") and line.strip():
                rows[line.split("\t")[0]] = line
        for n, path in written:
            c = VARIANTS[n]
            desc = (f"{'tied' if c['tied'] else 'untied'} n_embd={c['n_embd']} n_head={c['n_head']} "
                    f"n_head_kv={c['n_head_kv']} head_dim={c['head_dim']} n_ff={c['n_ff']} "
                    f"n_layer={len(c['layers'])} rope_base={c['rope_base']:g} eps={c['eps']:g}")
            rows[n] = f"{n}\t{n}.gguf\t{sha256_file(path)}\t{os.path.getsize(path)}\t{desc}\n"
        os.makedirs(os.path.dirname(MODELS_TSV), exist_ok=True)
        with open(MODELS_TSV, "w", encoding="utf-8") as f:
            f.write("# synthetic qwen3 models written by tests/ref/make_qwen3_gguf.py (gguf 0.19.0); "
                    "file relative to its --out directory (default build/test-models)\n")
            f.write("# name\tfile\tsha256\tbytes\tconfig\n")
            for n in VARIANTS:
                if n in rows:
                    f.write(rows[n])
    return 0


if __name__ == "__main__":
    sys.exit(main())
