#!/usr/bin/env python3
"""make_gemma_golden.py - golden reference data for the `gemma3` architecture
(tests/golden/gemma3/), from the real gemma-3-270m Q4_K_M model.

The reference is llama.cpp through llama-cpp-python (the same environment as
make_golden.py, see tests/ref/README.md), plus numpy_gemma3.py (an
independent fp64 numpy forward pass) when it is present and --no-numpy is not
given. Like make_golden.py this is not part of `make check`: the C tests only
read what it wrote.

    sh scripts/fetch-gemma.sh ~/.local/share/hsq/models/gemma-3-270m-q4_k_m.gguf
    /tmp/refvenv/bin/python tests/ref/make_gemma_golden.py \\
        --model ~/.local/share/hsq/models/gemma-3-270m-q4_k_m.gguf [--stages tokens,logits,greedy,long]

Gemma's tokenizer adds <bos> (id 2): every token list below starts with it
(llama.cpp tokenize(bytes, add_bos=True, special=True)).

What it writes under tests/golden/gemma3/ (corpus text is never copied, only
located by offset and length; the formats are in tests/ref/README.md):
    tok/NAME.txt        gemma-specific tokenizer edge cases (the shared edge
                        cases are read from ../tok/, written by make_golden.py)
    prompts/NAME.txt    prompt texts
    tokens.tsv          tokenization cases and the expected ids (BOS included)
    logits.tsv          final-position logits, summarized: full-vector stats,
                        top-10, and the values at a fixed id subset in
                        logits/NAME.ids.i32 + logits/NAME.f32 (+ .np.f32)
    greedy.tsv          32-token greedy continuations with the top-2 gap
    long.tsv            the long-context case: ~32K-token prompt from a corpus
                        slice, 32 greedy tokens, top-2 gap and runner-up ids,
                        wall times; long_tokens.txt holds its prompt ids
    agreement.txt       what was run, figures and timings
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# Shared helpers and texts of the default-model golden generator.
from make_golden import (EDGE_CASES, CORPUS_CASES, PASSAGE, LlamaRef,  # noqa: E402
                         compare, corpus_slice, first_diff, fnv1a64, gaps_str, ids_str,
                         sha256_file, write_bytes, log)

MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
N_GEN = 32
SEL_STRIDE = 64     # logits stored at ids 0, 64, 128, ... plus both references' top-64
SEL_TOP = 64

# Gemma-specific edge cases: control tokens (<start_of_turn>, <bos>, ...) and
# the user-defined whitespace-run tokens (ids 107.. are "\n", "\n\n", ...; runs
# of spaces and tabs also have their own tokens), byte fallback (<0xNN>).
GEMMA_EDGE = [
    ("g_turns", "<start_of_turn>user\nWrite a haiku about rain.<end_of_turn>\n<start_of_turn>model\n"),
    ("g_bos_inline", "text <bos> more <eos> end"),
    ("g_controls", "<pad><unk><mask>[multimodal]<unused0><unused6241><start_of_image><end_of_image>"),
    ("g_partial_ctl", "<start_of_turn <end_of_turn> <start_of_turnX>"),
    ("g_newline_runs", "a\nb\n\nc\n\n\nd" + "\n" * 31 + "e" + "\n" * 40 + "f"),
    ("g_space_runs", "a  b   c" + " " * 31 + "d" + " " * 40 + "e"),
    ("g_tab_runs", "\ta\t\tb" + "\t" * 31 + "c" + "\t" * 40 + "d"),
    ("g_leading_space", " hello  world "),
    ("g_byte_fallback", "\u0378\u0379 \U000E0001 \uFFFF \U0010FFFD"),
    ("g_rare_cjk", "𠀀𠀁𪚥 龘 鱻 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"),
    ("g_mixed_nl_space", "  \n  \n\t \n \t\n"),
]

CHAT = "<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"

# name -> (text, has_logits). Logits prompts are also greedy prompts.
PROMPTS = [
    ("short", "The capital of France is", True),
    ("chat", CHAT.format(q="What is the boiling point of water at sea level, in degrees Celsius?"), True),
    ("passage", PASSAGE + "\n\nQuestion: What did Marta find inside the wooden chest?\nAnswer:", True),
    ("multi", "Le matin, la ville se réveille lentement. Am Morgen erwacht die Stadt langsam. "
              "朝、街はゆっくりと目を覚ます。 In the morning, the city", True),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
    ("story", CHAT.format(q="List three primary colors."), False),
    ("sliding", None, False),  # ~1500 tokens of prose: crosses the 512-token sliding window
]
SLIDING_SRC = ("moby-dick.txt", 700000, 6000)

# The long case: a corpus prefix of at most LONG_TOKENS tokens (BOS included),
# cut at a line boundary; 32 greedy tokens follow (n_ctx 32768 holds both).
LONG_SRC = "moby-dick.txt"
LONG_OFFSET = 0
LONG_TOKENS = 32000
LONG_CTX = 32768


def sel_ids(n_vocab, *logit_vecs):
    s = set(range(0, n_vocab, SEL_STRIDE))
    for v in logit_vecs:
        if v is not None:
            s.update(int(i) for i in np.argsort(-v, kind="stable")[:SEL_TOP])
    return np.array(sorted(s), dtype="<i4")


def stats(v):
    """argmax, max, l2 norm, mean, logsumexp of a full logit vector (fp64)."""
    v = v.astype(np.float64)
    m = float(v.max())
    lse = m + float(np.log(np.sum(np.exp(v - m))))
    return (int(np.argmax(v)), m, float(np.linalg.norm(v)), float(v.mean()), lse)


def stats_str(s):
    return "%d %.6f %.6f %.6f %.6f" % s


def top10(v):
    return [int(i) for i in np.argsort(-v, kind="stable")[:10]]


class LongRef(LlamaRef):
    def __init__(self, model, n_ctx):
        from llama_cpp import Llama
        # n_batch = n_ubatch = 512, flash attention off, f16 KV cache (defaults).
        self.l = Llama(model_path=model, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                       flash_attn=False, logits_all=False, n_threads=2, n_threads_batch=2,
                       seed=0, verbose=False)
        self.n_vocab = self.l.n_vocab()

    def run_long(self, tokens, n_gen):
        self.l.reset()
        t0 = time.time()
        self.l.eval(list(tokens))
        t_prefill = time.time() - t0
        logits = self.last_logits()
        first = logits
        out, gaps, second = [], [], []
        t0 = time.time()
        for _ in range(n_gen):
            t = int(np.argmax(logits))
            v = logits.copy()
            v[t] = -np.inf
            s = int(np.argmax(v))
            gaps.append(float(logits[t] - logits[s]))
            out.append(t)
            second.append(s)
            self.l.eval([t])
            logits = self.last_logits()
        return first, out, gaps, second, t_prefill, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description="regenerate tests/golden/gemma3 from llama.cpp")
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpora", default=None)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "gemma3"))
    ap.add_argument("--stages", default="tokens,logits,greedy,long",
                    help="comma-separated subset of tokens,logits,greedy,long")
    ap.add_argument("--no-numpy", action="store_true", help="skip numpy_gemma3.py")
    ap.add_argument("--long-tokens", type=int, default=LONG_TOKENS)
    a = ap.parse_args()
    stages = set(a.stages.split(","))

    import llama_cpp
    from llama_cpp import Llama

    sha = sha256_file(a.model)
    if sha != MODEL_SHA256:
        sys.exit(f"make_gemma_golden: {a.model}: sha256 {sha} is not gemma-3-270m-q4_k_m.gguf")
    corpora = a.corpora
    if corpora is None:
        shared = os.environ.get("HSQ_SHARED") or os.path.join(REPO, "..", "shared")
        corpora = os.path.join(shared, "corpora")
    if not os.path.isdir(corpora):
        sys.exit(f"make_gemma_golden: corpora directory {corpora} not found (use --corpora)")
    out = a.out
    golden = os.path.dirname(out)
    os.makedirs(os.path.join(out, "logits"), exist_ok=True)
    summary = []

    def say(s):
        log(s)
        summary.append(s)

    say(f"# make_gemma_golden.py: llama-cpp-python {llama_cpp.__version__}, numpy {np.__version__}, "
        f"model {os.path.basename(a.model)} (sha256 {sha[:12]}...)")
    vocab = Llama(model_path=a.model, vocab_only=True, verbose=False)

    def tok(b):
        return vocab.tokenize(b, add_bos=True, special=True)

    def read_corpus(src):
        return open(os.path.join(corpora, src), "rb").read()

    # ----------------------------------------------------------- tokens
    if "tokens" in stages:
        rows = []
        for name, text in EDGE_CASES:
            b = text.encode("utf-8")
            rel = f"../tok/{name}.txt"
            p = os.path.join(out, rel)
            if not os.path.exists(p) or open(p, "rb").read() != b:
                sys.exit(f"make_gemma_golden: {p} missing or different: run make_golden.py first")
            rows.append((name, rel, 0, len(b), fnv1a64(b), tok(b)))
        for name, text in GEMMA_EDGE:
            b = text.encode("utf-8")
            rel = f"tok/{name}.txt"
            write_bytes(os.path.join(out, rel), b)
            rows.append((name, rel, 0, len(b), fnv1a64(b), tok(b)))
        for name, src, off, length in CORPUS_CASES:
            start, n, s = corpus_slice(read_corpus(src), off, length)
            rows.append((name, "corpora:" + src, start, n, fnv1a64(s), tok(s)))
        with open(os.path.join(out, "tokens.tsv"), "w") as f:
            f.write("# tokenization golden (gemma3): llama.cpp tokenize(bytes, add_bos=True, special=True); "
                    "source relative to this file's folder or corpora:\n")
            f.write("# name\tsource\toffset\tlength\tfnv1a64\tn_ids\tids\n")
            for name, src, off, n, h, ids in rows:
                f.write(f"{name}\t{src}\t{off}\t{n}\t{h}\t{len(ids)}\t{ids_str(ids)}\n")
        say(f"tokens: {len(EDGE_CASES)} shared + {len(GEMMA_EDGE)} gemma edge cases, "
            f"{len(CORPUS_CASES)} corpus cases, {sum(len(r[5]) for r in rows)} ids")

    # ----------------------------------------------------------- prompts
    if "logits" in stages or "greedy" in stages:
        npm = None
        if not a.no_numpy:
            try:
                from numpy_gemma3 import NumpyGemma3
            except ImportError:
                NumpyGemma3 = None
                say("numpy_gemma3.py not present: llama.cpp only")
            if NumpyGemma3 is not None:
                t0 = time.time()
                npm = NumpyGemma3(a.model, dtype=np.float64)
                log(f"numpy model loaded in {time.time() - t0:.1f}s")
        ref = LlamaRef(a.model, 4096)
        lrows, grows = [], []
        for name, text, has_logits in PROMPTS:
            if text is None:  # corpus text: located, never copied
                src, off, length = SLIDING_SRC
                start, n, b = corpus_slice(read_corpus(src), off, length)
                rel = f"corpora:{src}@{start}+{n}"
            else:
                b = text.encode("utf-8")
                rel = f"prompts/{name}.txt"
                write_bytes(os.path.join(out, rel), b)
            ids = tok(b)
            t0 = time.time()
            first, gen, gaps = ref.run(ids, N_GEN)
            t_ref = time.time() - t0
            np_gen = np_gaps = np_first = None
            if npm is not None:
                np_gen, np_gaps, np_first = npm.greedy(ids, N_GEN)
            if has_logits and "logits" in stages:
                sel = sel_ids(len(first), first, np_first)
                base = f"logits/{name}"
                sel.tofile(os.path.join(out, base + ".ids.i32"))
                first[sel].astype("<f4").tofile(os.path.join(out, base + ".f32"))
                nf, np_st, np_t10 = "-", "-", "-"
                if np_first is not None:
                    nf = base + ".np.f32"
                    np_first[sel].astype("<f4").tofile(os.path.join(out, nf))
                    np_st = stats_str(stats(np_first))
                    np_t10 = ids_str(top10(np_first))
                    mx, cos = compare(first, np_first)
                    rng = float(first.max() - first.min())
                    say(f"logits {name}: {len(ids)} tokens, llama.cpp vs numpy max abs {mx:.4f} "
                        f"(logit range {rng:.2f}, rel {mx / rng:.2e}), cosine {cos:.7f}, "
                        f"argmax {int(np.argmax(first))} vs {int(np.argmax(np_first))}")
                else:
                    say(f"logits {name}: {len(ids)} tokens, argmax {int(np.argmax(first))}, "
                        f"max {float(first.max()):.3f}")
                lrows.append((name, rel, ids, len(sel), base, nf, stats_str(stats(first)),
                              ids_str(top10(first)), np_st, np_t10))
            g = f"greedy {name}: {len(ids)} tokens, min top-2 gap {min(gaps):.4f} [{t_ref:.1f}s]"
            if np_gen is not None:
                d = first_diff(gen, np_gen)
                g += (", numpy agrees" if d < 0 else
                      f", NUMPY DIVERGES at step {d} (llama.cpp gap {gaps[d]:.4f}, numpy gap {np_gaps[d]:.4f})")
            say(g)
            grows.append((name, rel, ids, gen, gaps, np_gen, np_gaps))
        if "logits" in stages:
            with open(os.path.join(out, "logits.tsv"), "w") as f:
                f.write("# final-position logits of llama.cpp (n_ctx 4096, f16 KV, 2 threads, flash attention off)"
                        " and numpy_gemma3.py (fp64), stored at the ids of logits/NAME.ids.i32 (int32 LE,"
                        " ascending: every 64th id plus both top-64); stats = argmax max l2 mean logsumexp"
                        " of the full vector\n")
                f.write("# name\tprompt\tn_tokens\ttokens\tn_sel\tsel\tstats\ttop10\tnp_sel\tnp_stats\tnp_top10\n")
                for name, rel, ids, nsel, base, nf, st, t10, npst, npt10 in lrows:
                    f.write(f"{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{nsel}\t{base}\t{st}\t{t10}\t"
                            f"{nf}\t{npst}\t{npt10}\n")
        if "greedy" in stages:
            with open(os.path.join(out, "greedy.tsv"), "w") as f:
                f.write("# greedy (argmax, ties to lowest id) continuations; gap = top1 - top2 logit at each step;"
                        " tokens include BOS\n")
                f.write("# name\tprompt\tn_tokens\ttokens\tn_gen\tids\tgaps\tnp_ids\tnp_gaps\n")
                for name, rel, ids, gen, gaps, npg, npgaps in grows:
                    f.write(f"{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{len(gen)}\t{ids_str(gen)}\t"
                            f"{gaps_str(gaps)}\t{ids_str(npg) if npg else '-'}\t"
                            f"{gaps_str(npgaps) if npg else '-'}\n")
        del ref

    # ----------------------------------------------------------- long context
    if "long" in stages:
        data = read_corpus(LONG_SRC)
        # Largest line-aligned prefix slice whose tokenization fits the budget.
        lo, hi = 1000, min(len(data) - LONG_OFFSET, a.long_tokens * 8)
        best = None
        while hi - lo > 64:
            mid = (lo + hi) // 2
            start, n, s = corpus_slice(data, LONG_OFFSET, mid)
            nt = len(tok(s))
            if nt <= a.long_tokens:
                best, lo = (start, n, s, nt), mid
            else:
                hi = mid
        start, n, s, nt = best
        ids = tok(s)
        assert len(ids) == nt and nt + N_GEN <= LONG_CTX
        with open(os.path.join(out, "long_tokens.txt"), "w") as f:
            f.write(ids_str(ids) + "\n")
        log(f"long: {LONG_SRC} [{start}, +{n}) -> {nt} tokens; running llama.cpp (n_ctx {LONG_CTX})")
        ref = LongRef(a.model, LONG_CTX)
        t0 = time.time()
        first, gen, gaps, second, t_pre, t_dec = ref.run_long(ids, N_GEN)
        wall = time.time() - t0
        base = "logits/long"
        sel = sel_ids(len(first), first)
        sel.tofile(os.path.join(out, base + ".ids.i32"))
        first[sel].astype("<f4").tofile(os.path.join(out, base + ".f32"))
        with open(os.path.join(out, "long.tsv"), "w") as f:
            f.write("# long-context greedy golden: llama.cpp, n_ctx 32768, n_batch/n_ubatch 512, f16 KV, "
                    "flash attention off, 2 threads; prompt = BOS + tokenize(corpus slice), ids in "
                    "long_tokens.txt; second = runner-up id at each step; gap = top1 - top2 logit; "
                    "last-prompt-position logits as in logits.tsv\n")
            f.write("# name\tsource\toffset\tlength\tfnv1a64\tn_tokens\ttokens_file\ttokens_fnv1a64\t"
                    "n_gen\tids\tgaps\tsecond\tsel\tstats\ttop10\tprefill_s\tdecode_s\n")
            tfnv = fnv1a64(ids_str(ids).encode())
            f.write(f"moby_32k\tcorpora:{LONG_SRC}\t{start}\t{n}\t{fnv1a64(s)}\t{nt}\tlong_tokens.txt\t"
                    f"{tfnv}\t{len(gen)}\t{ids_str(gen)}\t{gaps_str(gaps)}\t{ids_str(second)}\t"
                    f"{base}\t{stats_str(stats(first))}\t{ids_str(top10(first))}\t{t_pre:.1f}\t{t_dec:.1f}\n")
        say(f"long moby_32k: {nt} prompt tokens ({n} bytes at offset {start}), prefill {t_pre:.0f}s "
            f"({nt / t_pre:.0f} tok/s), {N_GEN} greedy tokens {t_dec:.1f}s, total {wall:.0f}s; "
            f"min top-2 gap {min(gaps):.4f} at step {int(np.argmin(gaps))}")

    mode = "a" if os.path.exists(os.path.join(out, "agreement.txt")) and stages != {
        "tokens", "logits", "greedy", "long"} else "w"
    with open(os.path.join(out, "agreement.txt"), mode) as f:
        f.write("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
