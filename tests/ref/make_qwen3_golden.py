#!/usr/bin/env python3
"""make_qwen3_golden.py - golden reference data for the `qwen3` architecture
(tests/golden/qwen3/), computed on the synthetic models of make_qwen3_gguf.py.

Two independent references, as for the default model (make_golden.py):
llama.cpp through llama-cpp-python, and numpy_qwen3.py (fp64). numpy_qwen3.py
is itself checked against llama.cpp on all-F32 copies of the models (F32 KV
cache), where the two must agree to float32 rounding. Tokenizer goldens use
the Hugging Face `tokenizers` package on the real tokenizer.json (the
definition of the Qwen3 tokenizer: NFC normalizer, the Qwen2 split regex,
byte-level BPE, added tokens); llama.cpp's tokenization of the same texts is
compared and every difference is listed in agreement.txt.

Environment: the venv of tests/ref/README.md plus `pip install tokenizers`.
    python3 tests/ref/make_qwen3_gguf.py --write-manifest      # models + models.tsv
    /tmp/refvenv/bin/python tests/ref/make_qwen3_golden.py [--no-f32-check]

What it writes under tests/golden/qwen3/ (formats in tests/ref/README.md; corpus
text is never copied, only located):
    tok/NAME.txt     qwen3-specific tokenizer edge cases (shared ones: ../tok/)
    prompts/NAME.txt prompt texts
    tokens.tsv       tokenization cases and the expected ids (no BOS: Qwen3 adds none)
    logits.tsv       final-position logits per model and prompt: stats, top-10, values at the
                     ids of logits/M.NAME.ids.i32 in logits/M.NAME.f32 (llama.cpp) and .np.f32
    greedy.tsv       32-token greedy continuations per model and prompt, both references
    agreement.txt    the figures
"""
import argparse
import os
import sys
import tempfile
import time
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from make_golden import (EDGE_CASES, CORPUS_CASES, PASSAGE, LlamaRef,  # noqa: E402
                         compare, corpus_slice, first_diff, fnv1a64, gaps_str, ids_str,
                         write_bytes, log)
from make_gemma_golden import sel_ids, stats, stats_str, top10  # noqa: E402
import make_qwen3_gguf  # noqa: E402

N_GEN = 32

_VI = "Tiếng Việt có dấu: người, được, những"
_KO = "한국어 자모 분해 테스트"
QWEN_EDGE = [
    ("q_hello_dog", "Hello, my dog is cute"),
    ("q_chat", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
               "Hi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n"),
    ("q_tools", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><tool_response>ok</tool_response>"),
    ("q_fim", "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>"),
    ("q_all_added", "<|endoftext|><|object_ref_start|><|object_ref_end|><|box_start|><|box_end|>"
                    "<|quad_start|><|quad_end|><|vision_start|><|vision_end|><|vision_pad|>"
                    "<|image_pad|><|video_pad|><|fim_pad|><|repo_name|><|file_sep|>"),
    ("q_pad_names", "[PAD151700] [PAD151935] <|im_start |> <think >"),
    ("q_adjacent_specials", "a<|im_end|>b<think>c</think>d<|im_start|><|im_start|>"),
    ("q_nfc_vi", unicodedata.normalize("NFC", _VI)),
    ("q_nfd_vi", unicodedata.normalize("NFD", _VI)),
    ("q_nfc_ko", unicodedata.normalize("NFC", _KO)),
    ("q_nfd_ko", unicodedata.normalize("NFD", _KO)),
    ("q_compat", "ﬁ ﬀ ① Ⅻ ｶ ℌ ㎏"),         # NFC keeps compatibility characters (no NFKC)
    ("q_contractions_case", "'S 'T 'RE 'VE 'M 'LL 'D 's 'll X'Ll"),
    ("q_spaces_newlines", "a \n b  \n\n  c\t\n\r\n d   "),
    ("q_numbers", "12345 ٣٤٥ ๑๒๓ ½ ²³ 1.5e10"),
    ("q_punct_newline", "end.\n\n\nnext?!\r\n\r\n--\n"),
]
TOK_CORPUS_EXTRA = [("kjv", "kjv.txt", 1000000, 20000)]

CHAT_SYS = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
# name -> (text or None for a corpus slice, has_logits)
PROMPTS = [
    ("hello", "Hello, my dog is cute", True),
    ("chat", CHAT_SYS + "<|im_start|>user\nWhat is the boiling point of water at sea level?"
             "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", True),
    ("multi", "Le matin, la ville se réveille lentement. Am Morgen erwacht die Stadt langsam. "
              "朝、街はゆっくりと目を覚ます。 In the morning, the city", True),
    ("passage", PASSAGE + "\n\nQuestion: What did Marta find inside the wooden chest?\nAnswer:", True),
    ("long", None, False),
]
LONG_SRC = ("moby-dick.txt", 700000, 6000)


def main():
    ap = argparse.ArgumentParser(description="regenerate tests/golden/qwen3 from llama.cpp + numpy")
    ap.add_argument("--models", default=os.path.join(REPO, "build", "test-models"))
    ap.add_argument("--shared", default=None, help="shared dir (corpora/, tokenizers/qwen3/)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "qwen3"))
    ap.add_argument("--no-f32-check", action="store_true")
    a = ap.parse_args()

    import llama_cpp
    from llama_cpp import Llama
    import tokenizers
    from numpy_qwen3 import NumpyQwen3

    shared = a.shared or os.environ.get("HSQ_SHARED") or os.path.join(REPO, "..", "shared")
    corpora = os.path.join(shared, "corpora")
    tokjson = os.path.join(shared, "tokenizers", "qwen3", "tokenizer.json")
    out = a.out
    os.makedirs(os.path.join(out, "logits"), exist_ok=True)
    manifest = make_qwen3_gguf.read_manifest()
    models = {}
    for name in make_qwen3_gguf.VARIANTS:
        p = os.path.join(a.models, name + ".gguf")
        if manifest.get(name) != make_qwen3_gguf.sha256_file(p):
            sys.exit(f"make_qwen3_golden: {p} does not match models.tsv: run "
                     "make_qwen3_gguf.py --write-manifest first")
        models[name] = p
    summary = []

    def say(s):
        log(s)
        summary.append(s)

    say(f"# make_qwen3_golden.py: llama-cpp-python {llama_cpp.__version__}, numpy {np.__version__}, "
        f"tokenizers {tokenizers.__version__}, models {', '.join(models)} (sha256 in models.tsv)")

    def read_corpus(src):
        return open(os.path.join(corpora, src), "rb").read()

    # ----------------------------------------------------------- tokens
    hf = tokenizers.Tokenizer.from_file(tokjson)
    vocab = Llama(model_path=models["qwen3-a"], vocab_only=True, verbose=False)

    def hf_tok(b):
        return hf.encode(b.decode("utf-8"), add_special_tokens=False).ids

    def ll_tok(b):
        return vocab.tokenize(b, add_bos=False, special=True)

    assert hf_tok(b"Hello, my dog is cute") == [9707, 11, 847, 5562, 374, 18838]
    rows, ndiff = [], 0
    cases = []
    for name, text in EDGE_CASES:
        b = text.encode("utf-8")
        rel = f"../tok/{name}.txt"
        p = os.path.join(out, rel)
        if not os.path.exists(p) or open(p, "rb").read() != b:
            sys.exit(f"make_qwen3_golden: {p} missing or different: run make_golden.py first")
        cases.append((name, rel, 0, len(b), b))
    for name, text in QWEN_EDGE:
        b = text.encode("utf-8")
        rel = f"tok/{name}.txt"
        write_bytes(os.path.join(out, rel), b)
        cases.append((name, rel, 0, len(b), b))
    for name, src, off, length in CORPUS_CASES + TOK_CORPUS_EXTRA:
        start, n, s = corpus_slice(read_corpus(src), off, length)
        cases.append((name, "corpora:" + src, start, n, s))
    for name, src, off, n, b in cases:
        ids = hf_tok(b)
        lids = ll_tok(b)
        if lids != ids:
            ndiff += 1
            d = first_diff(ids, lids)
            say(f"tokens {name}: llama.cpp differs from tokenizers at index {d} "
                f"({len(lids)} vs {len(ids)} ids; llama.cpp {ids_str(lids[max(0, d - 2):d + 6])} "
                f"vs {ids_str(ids[max(0, d - 2):d + 6])})")
        rows.append((name, src, off, n, fnv1a64(b), ids))
    with open(os.path.join(out, "tokens.tsv"), "w") as f:
        f.write(f"# tokenization golden (qwen3 vocabulary): Hugging Face tokenizers {tokenizers.__version__} "
                "on shared/tokenizers/qwen3/tokenizer.json, encode(text, add_special_tokens=False) "
                "(NFC, Qwen2 split regex, byte-level BPE, added tokens always matched); no BOS; "
                "source relative to this file's folder or corpora:\n")
        f.write("# name\tsource\toffset\tlength\tfnv1a64\tn_ids\tids\n")
        for name, src, off, n, h, ids in rows:
            f.write(f"{name}\t{src}\t{off}\t{n}\t{h}\t{len(ids)}\t{ids_str(ids)}\n")
    say(f"tokens: {len(rows)} cases, {sum(len(r[5]) for r in rows)} ids; llama.cpp "
        f"(tokenize special=True on qwen3-a.gguf) differs on {ndiff}")

    # ----------------------------------------------------------- prompts
    prompts = []
    for name, text, has_logits in PROMPTS:
        if text is None:
            src, off, length = LONG_SRC
            start, n, b = corpus_slice(read_corpus(src), off, length)
            rel = f"corpora:{src}@{start}+{n}"
        else:
            b = text.encode("utf-8")
            rel = f"prompts/{name}.txt"
            write_bytes(os.path.join(out, rel), b)
        prompts.append((name, rel, hf_tok(b), has_logits))
        if ll_tok(b) != prompts[-1][2]:
            sys.exit(f"make_qwen3_golden: prompt {name}: llama.cpp and tokenizers disagree")

    lrows, grows = [], []
    worst = {}
    for mname, path in models.items():
        t0 = time.time()
        npm = NumpyQwen3(path, dtype=np.float64)
        ref = LlamaRef(path, 4096)
        for name, rel, ids, has_logits in prompts:
            first, gen, gaps = ref.run(ids, N_GEN)
            np_gen, np_gaps, np_first = npm.greedy(ids, N_GEN)
            if has_logits:
                sel = sel_ids(len(first), first, np_first)
                base = f"logits/{mname}.{name}"
                sel.tofile(os.path.join(out, base + ".ids.i32"))
                first[sel].astype("<f4").tofile(os.path.join(out, base + ".f32"))
                np_first[sel].astype("<f4").tofile(os.path.join(out, base + ".np.f32"))
                mx, cos = compare(first, np_first)
                rng = float(first.max() - first.min())
                w = worst.setdefault(mname, [0.0, 1.0])
                w[0], w[1] = max(w[0], mx), min(w[1], cos)
                say(f"logits {mname} {name}: {len(ids)} tokens, llama.cpp vs numpy max abs {mx:.4f} "
                    f"(logit range {rng:.2f}, rel {mx / rng:.2e}), cosine {cos:.7f}, "
                    f"argmax {int(np.argmax(first))} vs {int(np.argmax(np_first))}")
                lrows.append((mname, name, rel, ids, len(sel), base + ".ids.i32", base + ".f32",
                              stats_str(stats(first)),
                              ids_str(top10(first)), base + ".np.f32", stats_str(stats(np_first)),
                              ids_str(top10(np_first))))
            d = first_diff(gen, np_gen)
            say(f"greedy {mname} {name}: {len(ids)} tokens, min top-2 gap {min(gaps):.4f}"
                + (", numpy agrees" if d < 0 else
                   f", NUMPY DIVERGES at step {d} (llama.cpp gap {gaps[d]:.4f}, numpy gap {np_gaps[d]:.4f})"))
            grows.append((mname, name, rel, ids, gen, gaps, np_gen, np_gaps))
        del ref
        log(f"{mname}: {time.time() - t0:.0f}s")
    for mname, (mx, cos) in worst.items():
        say(f"logits worst case {mname}: max abs {mx:.4f}, cosine {cos:.7f}")

    with open(os.path.join(out, "logits.tsv"), "w") as f:
        f.write("# final-position logits of llama.cpp (n_ctx 4096, f16 KV, 2 threads) and numpy_qwen3.py "
                "(fp64) on the synthetic models of models.tsv: float32 LE values at the ids of sel_ids (int32 LE, "
                "ascending: every 64th id plus both top-64); stats = argmax max l2 "
                "mean logsumexp of the full vector\n")
        f.write("# model\tname\tprompt\tn_tokens\ttokens\tn_sel\tsel_ids\tlogits\tstats\ttop10\t"
                "np_logits\tnp_stats\tnp_top10\n")
        for r in lrows:
            mname, name, rel, ids, nsel, idf, lf, st, t10, nf, npst, npt10 = r
            f.write(f"{mname}\t{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{nsel}\t{idf}\t{lf}\t{st}\t{t10}\t"
                    f"{nf}\t{npst}\t{npt10}\n")
    with open(os.path.join(out, "greedy.tsv"), "w") as f:
        f.write("# greedy (argmax, ties to lowest id) continuations; gap = top1 - top2 logit at each step; "
                "ids/gaps from llama.cpp, np_ids/np_gaps from numpy_qwen3.py (fp64)\n")
        f.write("# model\tname\tprompt\tn_tokens\ttokens\tn_gen\tids\tgaps\tnp_ids\tnp_gaps\n")
        for mname, name, rel, ids, gen, gaps, npg, npgaps in grows:
            f.write(f"{mname}\t{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{len(gen)}\t{ids_str(gen)}\t"
                    f"{gaps_str(gaps)}\t{ids_str(npg)}\t{gaps_str(npgaps)}\n")

    # ----------------------------------------------------------- f32 cross-check
    if not a.no_f32_check:
        from dequant_gguf import convert
        for mname, path in models.items():
            npm = NumpyQwen3(path, dtype=np.float64)
            tmp = os.path.join(tempfile.gettempdir(), f"hsq-{mname}-f32-{os.getpid()}.gguf")
            convert(path, tmp)
            try:
                lf = Llama(model_path=tmp, n_ctx=4096, logits_all=False, n_threads=2, seed=0,
                           verbose=False, type_k=0, type_v=0)
                for name, rel, ids, has_logits in prompts:
                    lf.reset()
                    lf.eval(ids)
                    lg = np.ctypeslib.as_array(lf._ctx.get_logits_ith(-1), shape=(lf.n_vocab(),)).copy()
                    npl = npm.forward(ids, npm.new_cache(), all_logits=False)
                    mx, cos = compare(lg, npl)
                    say(f"f32 check {mname} {name}: llama.cpp on the all-F32 model (F32 KV) vs numpy: "
                        f"max abs {mx:.2e}, cosine {cos:.9f}, argmax {int(np.argmax(lg))} vs {int(np.argmax(npl))}")
                del lf
            finally:
                os.unlink(tmp)

    with open(os.path.join(out, "agreement.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
