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
        --model ~/.local/share/hsq/models/gemma-3-270m-q4_k_m.gguf [--stages tokens,logits,greedy,long,long-numpy]

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
# the user-defined tokens (ids 107..137 are runs of 1..31 "\n", 138..167 runs
# of 2..31 spaces, 168..237 HTML tags, 255968..255998 runs of 1..31 tabs),
# byte fallback (<0xNN>, ids 238..493).
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
    # HTML tags are USER_DEFINED tokens (ids 168..237): matched whole, special or not.
    ("g_html", "<b>bold</b> <table><tr><td>x</td></tr></table> <s>strike</s> <h1>T</h1><br> <div >"),
]

CHAT = "<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"

# (name, text, has_logits). Logits prompts are also greedy prompts. Chosen
# from 27 candidates written for this project (short completions, chats, the
# passage, multilingual, code, corpus slices) so that llama.cpp and the exact
# numpy reference agree on all N_GEN greedy steps; llama.cpp's 8-bit
# activations flip near-ties on the others (as for the default model).
PROMPTS = [
    ("short", "Water boils at", True),
    ("chat", CHAT.format(q="What is the boiling point of water at sea level, in degrees Celsius?"), True),
    ("passage", CHAT.format(q="Read the story and answer the question.\n\n" + PASSAGE +
                            "\n\nQuestion: Who bought the lighthouse?"), True),
    ("multi", "Bonjour! Je m'appelle Marie et j'habite à Paris. Hallo! Ich heiße Hans. "
              "English: Hello! My name is", True),
    ("sliding", None, True),  # ~1400 tokens of prose: crosses the 512-token sliding window
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
    ("days", "Monday, Tuesday, Wednesday,", False),
    ("japan", CHAT.format(q="What is the capital of Japan?"), False),
    ("twelve", CHAT.format(q="What is 12 times 12?"), False),
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
        # swa_full=False: the sliding-window layers keep only window + ubatch
        # cells (llama.cpp's default outside llama-cpp-python) instead of
        # attending over a fully masked 32K cache; the result is the same up to
        # summation order, the cost ~3x lower.
        self.l = Llama(model_path=model, n_ctx=n_ctx, n_batch=512, n_ubatch=512,
                       flash_attn=False, swa_full=False, logits_all=False, n_threads=2,
                       n_threads_batch=2, seed=0, verbose=False)
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


def long_numpy_update(out, np_gen, np_gaps, np_first):
    """Fill long.tsv's np_* columns from a numpy greedy run; returns a summary line."""
    path = os.path.join(out, "long.tsv")
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("#"):
            continue
        f = ln.split("\t")
        gen = [int(x) for x in f[9].split()]
        gaps = [float(x) for x in f[10].split()]
        sel = np.fromfile(os.path.join(out, f[13]), dtype="<i4")
        base = f[13][:-len(".ids.i32")]
        np_first[sel].astype("<f4").tofile(os.path.join(out, base + ".np.f32"))
        f[19:] = [ids_str(np_gen), gaps_str(np_gaps), base + ".np.f32", stats_str(stats(np_first)),
                  ids_str(top10(np_first))]
        lines[i] = "\t".join(f)
        d = first_diff(gen, np_gen)
        msg = (f"long numpy {f[0]}: " + ("numpy agrees on all %d steps" % len(gen) if d < 0 else
               f"NUMPY DIVERGES at step {d} (llama.cpp gap {gaps[d]:.4f}, numpy gap {np_gaps[d]:.4f})")
               + f", numpy min top-2 gap {min(np_gaps):.4f} at step {int(np.argmin(np_gaps))}")
    with open(path, "w", encoding="utf-8") as fo:
        fo.write("\n".join(lines) + "\n")
    return msg


def main():
    ap = argparse.ArgumentParser(description="regenerate tests/golden/gemma3 from llama.cpp")
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpora", default=None)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "gemma3"))
    ap.add_argument("--stages", default="tokens,logits,greedy,long,long-numpy",
                    help="comma-separated subset of tokens,logits,greedy,long,long-numpy "
                         "(long-numpy: the fp64 numpy reference on long.tsv's prompt, ~20 min)")
    ap.add_argument("--no-numpy", action="store_true", help="skip numpy_gemma3.py")
    ap.add_argument("--long-tokens", type=int, default=LONG_TOKENS)
    ap.add_argument("--verify-f32", action="store_true",
                    help="check numpy_gemma3.py against llama.cpp on an all-F32 copy (~1.1 GB scratch file)")
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

    def prompt_bytes(name, text):
        """(bytes, prompt column) of a PROMPTS entry; corpus text is located, never copied."""
        if text is None:
            src, off, length = SLIDING_SRC
            start, n, b = corpus_slice(read_corpus(src), off, length)
            return b, f"corpora:{src}@{start}+{n}"
        return text.encode("utf-8"), f"prompts/{name}.txt"

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
    npm = None
    if "logits" in stages or "greedy" in stages:
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
            b, rel = prompt_bytes(name, text)
            if text is not None:
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
                lrows.append((name, rel, ids, len(sel), base + ".ids.i32", base + ".f32", nf,
                              stats_str(stats(first)),
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
                        " and numpy_gemma3.py (fp64), float32 LE values at the ids of sel_ids (int32 LE,"
                        " ascending: every 64th id plus both top-64); stats = argmax max l2 mean logsumexp"
                        " of the full vector\n")
                f.write("# name\tprompt\tn_tokens\ttokens\tn_sel\tsel_ids\tlogits\tstats\ttop10\t"
                        "np_logits\tnp_stats\tnp_top10\n")
                for name, rel, ids, nsel, idf, lf, nf, st, t10, npst, npt10 in lrows:
                    f.write(f"{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{nsel}\t{idf}\t{lf}\t{st}\t{t10}\t"
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

    # ----------------------------------------------------------- f32 cross-check
    if a.verify_f32 and not a.no_numpy:
        import tempfile
        from dequant_gguf import convert
        from numpy_gemma3 import NumpyGemma3
        if npm is None:
            npm = NumpyGemma3(a.model, dtype=np.float64)
        tmp = os.path.join(tempfile.gettempdir(), f"hsq-gemma3-f32-{os.getpid()}.gguf")
        convert(a.model, tmp)
        try:
            lf = Llama(model_path=tmp, n_ctx=4096, logits_all=False, n_threads=2, seed=0,
                       verbose=False, type_k=0, type_v=0)
            for name, text, has_logits in PROMPTS:
                if not has_logits:
                    continue
                ids = tok(prompt_bytes(name, text)[0])
                lf.reset()
                lf.eval(ids)
                lg = np.ctypeslib.as_array(lf._ctx.get_logits_ith(-1), shape=(lf.n_vocab(),)).copy()
                npl = npm.forward(ids, npm.new_cache(), all_logits=False)
                mx, cos = compare(lg, npl)
                say(f"f32 check {name}: llama.cpp on the all-F32 model (F32 KV) vs numpy: "
                    f"max abs {mx:.2e}, cosine {cos:.9f}, argmax {int(np.argmax(lg))} vs {int(np.argmax(npl))}")
            del lf
        finally:
            os.unlink(tmp)

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
                    "flash attention off, swa_full off, 2 threads; prompt = BOS + tokenize(corpus slice), ids in "
                    "long_tokens.txt; second = runner-up id at each step; gap = top1 - top2 logit; "
                    "last-prompt-position logits as in logits.tsv; np_* from numpy_gemma3.py (fp64, stage long-numpy)\n")
            f.write("# name\tsource\toffset\tlength\tfnv1a64\tn_tokens\ttokens_file\ttokens_fnv1a64\t"
                    "n_gen\tids\tgaps\tsecond\tn_sel\tsel_ids\tlogits\tstats\ttop10\tprefill_s\tdecode_s\t"
                    "np_ids\tnp_gaps\tnp_logits\tnp_stats\tnp_top10\n")
            tfnv = fnv1a64(ids_str(ids).encode())
            f.write(f"moby_32k\tcorpora:{LONG_SRC}\t{start}\t{n}\t{fnv1a64(s)}\t{nt}\tlong_tokens.txt\t"
                    f"{tfnv}\t{len(gen)}\t{ids_str(gen)}\t{gaps_str(gaps)}\t{ids_str(second)}\t"
                    f"{len(sel)}\t{base}.ids.i32\t{base}.f32\t{stats_str(stats(first))}\t{ids_str(top10(first))}\t"
                    f"{t_pre:.1f}\t{t_dec:.1f}\t-\t-\t-\t-\t-\n")
        say(f"long moby_32k: {nt} prompt tokens ({n} bytes at offset {start}), prefill {t_pre:.0f}s "
            f"({nt / t_pre:.0f} tok/s), {N_GEN} greedy tokens {t_dec:.1f}s, total {wall:.0f}s; "
            f"min top-2 gap {min(gaps):.4f} at step {int(np.argmin(gaps))}")

    # ----------------------------------------------------------- long context, numpy
    if "long-numpy" in stages and not a.no_numpy:
        from numpy_gemma3 import NumpyGemma3
        if npm is None:
            npm = NumpyGemma3(a.model, dtype=np.float64)
        t0 = time.time()
        ids = [int(x) for x in open(os.path.join(out, "long_tokens.txt")).read().split()]
        np_gen, np_gaps, np_first = npm.greedy(ids, N_GEN)
        say(long_numpy_update(out, np_gen, np_gaps, np_first) + f" [{time.time() - t0:.0f}s]")

    # agreement.txt keeps the lines of the stages not rerun this time.
    prefixes = {"tokens": ("tokens",), "logits": ("logits", "numpy_gemma3", "f32 check"),
                "greedy": ("greedy",), "long": ("long moby",), "long-numpy": ("long numpy",)}
    drop = tuple(p for st in stages for p in prefixes.get(st, ()))
    path = os.path.join(out, "agreement.txt")
    kept = []
    if os.path.exists(path):
        kept = [ln.rstrip("\n") for ln in open(path, encoding="utf-8")
                if not ln.startswith("#") and not ln.startswith(drop)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(summary[:1] + kept + summary[1:]) + "\n")


if __name__ == "__main__":
    main()
