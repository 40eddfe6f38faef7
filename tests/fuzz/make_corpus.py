#!/usr/bin/env python3
"""make_corpus.py - write the tiny synthetic GGUF models of the fuzz corpus.

    python3 tests/fuzz/make_corpus.py OUTDIR

Writes OUTDIR/tiny-llama.gguf (llama, gpt2 byte-level BPE tokenizer, two
layers, n_embd 16, one KV head of 16 dims: what tests/fuzz/make_snapshots.c
writes the snapshot corpus with), tiny-spm.gguf (sentencepiece tokenizer),
tiny-qwen3.gguf (per-head Q/K norms) and tiny-gemma3.gguf (post norms,
sliding window). Random weights from Python's Mersenne Twister with a fixed
seed; plain struct packing, no third-party modules. The files are a few KB
each: the fuzzer mutates the metadata and the tensor table, not the
weights.
"""
import random
import struct
import sys

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
G_F32, G_F16 = 0, 1
ALIGN = 32


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = s(key) + struct.pack("<I", typ)
    if typ == T_U32:
        return out + struct.pack("<I", val)
    if typ == T_I32:
        return out + struct.pack("<i", val)
    if typ == T_F32:
        return out + struct.pack("<f", val)
    if typ == T_BOOL:
        return out + struct.pack("<B", val)
    if typ == T_STR:
        return out + s(val)
    et, items = val
    out += struct.pack("<IQ", et, len(items))
    for it in items:
        out += s(it) if et == T_STR else struct.pack({T_I32: "<i", T_F32: "<f"}[et], it)
    return out


def gguf(kvs, tensors):
    """tensors: (name, shape ne[0..], type, floats)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    for name, ne, typ, vals in tensors:
        head += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        head += struct.pack("<IQ", typ, len(data))
        data += struct.pack("<%d%s" % (len(vals), "f" if typ == G_F32 else "e"), *vals)
        data += b"\0" * (-len(data) % ALIGN)
    head += b"\0" * (-len(head) % ALIGN)
    return head + data


def model(arch, tok, rng, n_layer=2, E=16, H=1, KV=1, HD=16, FF=16):
    kvs = [kv("general.architecture", T_STR, arch), kv("general.name", T_STR, "tiny-" + arch),
           kv(arch + ".block_count", T_U32, n_layer), kv(arch + ".context_length", T_U32, 256),
           kv(arch + ".embedding_length", T_U32, E), kv(arch + ".feed_forward_length", T_U32, FF),
           kv(arch + ".attention.head_count", T_U32, H), kv(arch + ".attention.head_count_kv", T_U32, KV),
           kv(arch + ".attention.key_length", T_U32, HD), kv(arch + ".attention.value_length", T_U32, HD),
           kv(arch + ".rope.freq_base", T_F32, 10000.0),
           kv(arch + ".attention.layer_norm_rms_epsilon", T_F32, 1e-5)]
    if arch == "gemma3":
        kvs.append(kv("gemma3.attention.sliding_window", T_U32, 8))
    kvs += tok
    n_vocab = VOCAB[tok is SPM_TOK]
    w = lambda n: [rng.uniform(-0.5, 0.5) for _ in range(n)]
    one = lambda n: [1.0 + rng.uniform(-0.1, 0.1) for _ in range(n)]
    ts = [("token_embd.weight", [E, n_vocab], G_F16, w(E * n_vocab)), ("output_norm.weight", [E], G_F32, one(E))]
    for l in range(n_layer):
        p = "blk.%d." % l
        ts += [(p + "attn_norm.weight", [E], G_F32, one(E)), (p + "ffn_norm.weight", [E], G_F32, one(E)),
               (p + "attn_q.weight", [E, H * HD], G_F16, w(E * H * HD)),
               (p + "attn_k.weight", [E, KV * HD], G_F16, w(E * KV * HD)),
               (p + "attn_v.weight", [E, KV * HD], G_F16, w(E * KV * HD)),
               (p + "attn_output.weight", [H * HD, E], G_F16, w(E * H * HD)),
               (p + "ffn_gate.weight", [E, FF], G_F16, w(E * FF)), (p + "ffn_up.weight", [E, FF], G_F16, w(E * FF)),
               (p + "ffn_down.weight", [FF, E], G_F16, w(E * FF))]
        if arch in ("qwen3", "gemma3"):
            ts += [(p + "attn_q_norm.weight", [HD], G_F32, one(HD)), (p + "attn_k_norm.weight", [HD], G_F32, one(HD))]
        if arch == "gemma3":
            ts += [(p + "post_attention_norm.weight", [E], G_F32, one(E)),
                   (p + "post_ffw_norm.weight", [E], G_F32, one(E))]
    return gguf(kvs, ts)


# gpt2 byte-level BPE: printable ASCII, the space as U+0120, a few merges.
BPE_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(33, 127)] + \
    ["\u0120", "\u0120t", "he", "\u0120the", "in", "\u0120a"]
BPE_MERGES = ["\u0120 t", "h e", "\u0120t he", "i n", "\u0120 a"]
BPE_TOK = [kv("tokenizer.ggml.model", T_STR, "gpt2"), kv("tokenizer.ggml.pre", T_STR, "smollm"),
           kv("tokenizer.ggml.tokens", T_ARR, (T_STR, BPE_TOKENS)),
           kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [3, 3, 3] + [1] * (len(BPE_TOKENS) - 3))),
           kv("tokenizer.ggml.merges", T_ARR, (T_STR, BPE_MERGES)),
           kv("tokenizer.ggml.bos_token_id", T_U32, 1), kv("tokenizer.ggml.eos_token_id", T_U32, 2),
           kv("tokenizer.ggml.add_bos_token", T_BOOL, 0),
           kv("tokenizer.chat_template", T_STR,
              "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")]
# sentencepiece: <unk> <s> </s>, byte fallback tokens, a few pieces.
SPM_TOKENS = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + \
    ["\u2581", "\u2581t", "he", "\u2581the", "a", "b", "c", "t", "h", "e"]
SPM_TOK = [kv("tokenizer.ggml.model", T_STR, "llama"),
           kv("tokenizer.ggml.tokens", T_ARR, (T_STR, SPM_TOKENS)),
           kv("tokenizer.ggml.scores", T_ARR, (T_F32, [0.0] * 259 + [-1.0, -2.0, -3.0, -4.0] + [-5.0] * 6)),
           kv("tokenizer.ggml.token_type", T_ARR, (T_I32, [2, 3, 3] + [6] * 256 + [1] * 10))]
VOCAB = {False: len(BPE_TOKENS), True: len(SPM_TOKENS)}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    rng = random.Random(38)
    for name, data in [("tiny-llama", model("llama", BPE_TOK, rng)), ("tiny-spm", model("llama", SPM_TOK, rng, 1)),
                       ("tiny-qwen3", model("qwen3", BPE_TOK, rng, 1)),
                       ("tiny-gemma3", model("gemma3", BPE_TOK, rng, 1))]:
        with open("%s/%s.gguf" % (out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
