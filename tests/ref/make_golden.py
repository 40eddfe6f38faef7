#!/usr/bin/env python3
"""make_golden.py - regenerate libhsq's golden reference data (tests/golden/).

The reference is an implementation that shares no code with libhsq: llama.cpp,
through the llama-cpp-python package built from PyPI source, plus the
independent fp32/fp64 numpy forward pass in numpy_llama.py. This script is not
part of `make check`; `make check` only reads what it wrote (see
tests/unit/test_golden.c and tests/unit/test_resume.c, and tests/ref/README.md
for the file formats).

Environment (what produced the committed files):
    python3 -m venv /tmp/refvenv
    CMAKE_ARGS=-DGGML_NATIVE=ON /tmp/refvenv/bin/pip install \\
        llama-cpp-python==0.3.36 numpy==2.4.6 gguf==0.19.0
    /tmp/refvenv/bin/python tests/ref/make_golden.py \\
        --model SmolLM2-135M-Instruct.Q4_1.gguf   # sha256 b179c952...db53

Options: --corpora DIR (default $HSQ_SHARED/corpora, else <repo>/../shared/corpora),
--out DIR (default tests/golden), --no-numpy (skip the numpy reference, much
faster), --verify-f32 (also check numpy_llama.py against llama.cpp on an all-F32
copy of the model; writes a ~540 MB scratch file to $TMPDIR).

What it writes (all small; corpus text is never copied, only located):
    tok/NAME.txt        edge-case texts written here (UTF-8 bytes, exact)
    prompts/NAME.txt    prompt texts for logits / greedy / resume
    tokens.tsv          tokenization cases and the expected ids
    logits.tsv          prompts, their tokens, top-10 ids; logits/NAME.f32 (llama.cpp)
                        and logits/NAME.np.f32 (numpy), n_vocab float32 LE each
    greedy.tsv          greedy continuations with the top-2 logit gap at each step
    resume.tsv          documents + questions for the snapshot-resume test
    agreement.txt       llama.cpp-vs-numpy figures (max abs error, cosine, greedy)
"""
import argparse
import hashlib
import os
import sys
import time
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
N_GEN = 32

# ---------------------------------------------------------------- edge cases
# Texts written for this project (committable). Invalid UTF-8 is left out on
# purpose: llama.cpp's handling of invalid bytes is not a specification.
_ACCENTS = "café naïve résumé Zoë Ångström señor Dvořák crème brûlée"
EDGE_CASES = [
    ("empty", ""),
    ("space", " "),
    ("lead_trail", "   leading and trailing   "),
    ("newlines", "\n\n\n"),
    ("tabs", "\t\ttabs"),
    ("multi_space", "a  b   c"),
    ("long_spaces", "x" + " " * 200 + "y"),
    ("only_spaces", " " * 64),
    ("crlf", "line one\r\nline two\r\n\r\nline four\r\n"),
    ("newline_mix", "a\n \n\tb\n\n\n  c \n"),
    ("emoji", "I love \U0001F355 and \U0001F389! \U0001F44D\U0001F3FD thumbs \U0001F600\U0001F600"),
    ("emoji_zwj", "family: \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466, "
                  "coder: \U0001F469\U0001F3FE\u200d\U0001F4BB, rainbow: \U0001F3F3\ufe0f\u200d\U0001F308"),
    ("flags", "flags: \U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA\U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8 done"),
    ("cjk", "中文分词测试：我们今天去公园散步。日本語のテキストも含みます。カタカナとひらがな。"),
    ("korean", "안녕하세요, 세계! 한국어 토큰화 테스트입니다."),
    ("arabic", "مرحبا بالعالم، هذا اختبار للترميز ١٢٣."),
    ("scripts", "Ελληνικά русский текст עברית हिन्दी ไทย ქართული"),
    ("accents_nfc", unicodedata.normalize("NFC", _ACCENTS)),
    ("accents_nfd", unicodedata.normalize("NFD", _ACCENTS)),
    ("digits", "1234567890 3.14159 1,000,000"),
    ("long_number", "123456789012345678901234567890 -42 +7 0x1F 1e-9"),
    ("contractions", "I'm don't we'll they've she'd it's I'M DON'T You're"),
    ("code", "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n    if a is None:\n"
             "        return b\n\treturn a + b  # tab-indented\n\nprint(add(1, 2))\n"),
    ("special", "<|im_start|>user\nhi<|im_end|>"),
    ("special_all", "<|endoftext|><|im_start|>system\nx<|im_end|>\n<|im_start|>assistant\n"),
    ("special_partial", "<|im_start not special |> <|im_end"),
    ("mixed", "Hello World!!! ...   ???"),
    ("punct_runs", "!!!!!!!!??????......------======"),
    ("typography", "“quoted” ‘single’ — dash … ellipsis • bullet ™ © ½ ∑ x² ≤ ∞ → λ"),
    ("zero_width", "a\u200bb\ufeffc\u00a0d\u2009e"),
    ("long_word", "supercalifragilisticexpialidocious" * 3),
    ("url_email", "see https://example.org/a/b?c=1&d=2#frag or mail me@example.com"),
]

# Corpus cases: (name, source relative to the corpora dir, nominal offset, nominal length).
# The slice actually used starts after the first newline at/after the nominal
# offset and ends after the last newline before offset+length, so it begins
# and ends on UTF-8 character boundaries.
CORPUS_CASES = [
    ("en_moby", "moby-dick.txt", 400000, 20000),
    ("en_sotu", "sotu/2009_barack_obama_d.txt", 0, 20000),
    ("de", "multilingual/manpages.de.txt", 300000, 20000),
    ("es", "multilingual/manpages.es.txt", 300000, 20000),
    ("fr", "multilingual/manpages.fr.txt", 300000, 20000),
    ("ja", "multilingual/manpages.ja.txt", 300000, 20000),
    ("ru", "multilingual/manpages.ru.txt", 300000, 20000),
    ("zh", "multilingual/manpages.zh.txt", 300000, 20000),
]

CHAT_SYS = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
            "trained by Hugging Face<|im_end|>\n")

PASSAGE = (
    "The lighthouse at the end of the northern pier had been dark for eleven years when "
    "Marta Ilves bought it at auction for the price of a used bicycle. Nobody in the town "
    "understood why. The lamp room was full of gull feathers, the spiral stairs were "
    "rusted through in three places, and the keeper's cottage had lost half of its roof "
    "to the storm of the previous winter. She spent the first summer doing nothing but "
    "carrying things down those stairs: broken glass, a nest of copper wire, two hundred "
    "and forty empty paint tins, and a wooden chest that nobody had opened since the war. "
    "Inside the chest she found the keeper's logbooks, forty volumes of them, written in "
    "a small careful hand. Every night for thirty-one years the keeper had recorded the "
    "wind, the state of the sea, the ships that passed and the hour at which the lamp was "
    "lit. On some nights he had added a line or two of his own: a note about a fox on the "
    "breakwater, a complaint about the price of oil, the birth of a daughter. Marta read "
    "them all that autumn, by candlelight, while the rain came in through the roof. By the "
    "time she reached the last volume she knew the names of the fishing boats better than "
    "the fishermen did, and she had decided that the lamp would be lit again before the "
    "end of the year. The harbour board said it could not be done. The engineer they sent "
    "said the lens was cracked beyond repair. Marta listened politely to both of them, "
    "thanked them for their time, and wrote to the glassworks in the south that had made "
    "the lens in the first place."
)

# (name, text, has_logits). Logits prompts are also greedy prompts.
# Chosen from ~40 candidates written for this project so that llama.cpp and
# the exact numpy reference agree on all N_GEN greedy steps with a clear
# top-2 gap (see README.md: llama.cpp's 8-bit activations flip near-ties).
def _chat(q):
    return CHAT_SYS + "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"


PROMPTS = [
    ("short", "The chemical symbol for gold is", True),
    ("chat", _chat("Name the four seasons of the year."), True),
    ("passage", _chat("Read the story and answer the question.\n\n" + PASSAGE +
                      "\n\nQuestion: Who bought the lighthouse?"), True),
    ("multi", "Bonjour! Je m'appelle Marie et j'habite à Paris. Hallo! Ich heiße Hans. "
              "English: Hello! My name is", True),
    ("code", "def factorial(n):\n    if n == 0:\n        return 1\n", False),
    ("html", "<html>\n<head>\n<title>My page</title>\n", False),
    ("chat_code", _chat("Write a Python function that returns the square of a number."), False),
    ("capital", _chat("What is the capital of Japan?"), False),
]

# Resume documents: (name, source, nominal offset, nominal length, question).
# source "golden:REL" is a file under tests/golden (always present);
# "corpora:REL" is read from the shared corpora (test skips when absent).
QUESTION = ("\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")
RESUME_DOCS = [
    ("passage", "golden:prompts/passage_doc.txt", 0, None,
     "Who or what is the text above about?"),
    ("moby", "corpora:moby-dick.txt", 700000, 7000,
     "Write one question that the text above answers."),
    ("fr_man", "corpora:multilingual/manpages.fr.txt", 900000, 5000,
     "Summarize the text above in one sentence."),
    ("sotu_4k", "corpora:sotu/1961_john_f_kennedy_d.txt", 0, 21500,
     "Summarize the text above in one sentence."),
]


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h ^= c
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def corpus_slice(data, off, length):
    """Byte range [start, start+n) of data near (off, length) that starts and
    ends at a line break (or, in single-line files, a sentence end or a space),
    hence on UTF-8 character boundaries."""
    def after(pos):  # first boundary at/after pos
        for sep in (b"\n", b". ", b" "):
            i = data.find(sep, pos)
            if i >= 0:
                return i + len(sep)
        return len(data)

    def before(pos, lo):  # last boundary at/before pos
        for sep, keep in ((b"\n", 1), (b". ", 1), (b" ", 0)):
            i = data.rfind(sep, lo, pos)
            if i >= 0:
                return i + keep
        return pos

    start = after(off) if off > 0 else 0
    end = min(len(data), start + length)
    if end < len(data):
        end = before(end, start)
    s = data[start:end]
    s.decode("utf-8")  # must be valid
    return start, end - start, s


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for blk in iter(lambda: f.read(1 << 20), b""):
            h.update(blk)
    return h.hexdigest()


def write_bytes(path, b):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b)


def ids_str(ids):
    return " ".join(str(int(i)) for i in ids)


def gaps_str(g):
    return " ".join("%.4f" % x for x in g)


class LlamaRef:
    """llama.cpp eval + argmax loop (no sampler involved)."""

    def __init__(self, model, n_ctx):
        from llama_cpp import Llama
        # The parameters of the issue; flash attention off, KV cache f16 (defaults).
        self.l = Llama(model_path=model, n_ctx=n_ctx, logits_all=False, n_threads=2,
                       seed=0, verbose=False)
        self.n_vocab = self.l.n_vocab()

    def last_logits(self):
        p = self.l._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(p, shape=(self.n_vocab,)).astype(np.float32).copy()

    def run(self, tokens, n_gen):
        self.l.reset()
        self.l.eval(list(tokens))
        logits = self.last_logits()
        first = logits
        out, gaps = [], []
        for _ in range(n_gen):
            # argmax with ties to the lowest id (np.argmax returns the first)
            t = int(np.argmax(logits))
            v = logits.copy()
            v[t] = -np.inf
            gaps.append(float(logits[t] - v.max()))
            out.append(t)
            self.l.eval([t])
            logits = self.last_logits()
        return first, out, gaps


def compare(a, b):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    mx = float(np.max(np.abs(a - b)))
    cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return mx, cos


def first_diff(x, y):
    for i, (p, q) in enumerate(zip(x, y)):
        if p != q:
            return i
    return -1 if len(x) == len(y) else min(len(x), len(y))


def main():
    ap = argparse.ArgumentParser(description="regenerate tests/golden from llama.cpp + numpy")
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpora", default=None)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    ap.add_argument("--no-numpy", action="store_true")
    ap.add_argument("--verify-f32", action="store_true")
    ap.add_argument("--skip-sha", action="store_true", help="do not insist on the SmolLM2 Q4_1 file")
    a = ap.parse_args()

    import llama_cpp
    from llama_cpp import Llama

    if not a.skip_sha:
        sha = sha256_file(a.model)
        if sha != MODEL_SHA256:
            sys.exit(f"make_golden: {a.model}: sha256 {sha} is not SmolLM2-135M-Instruct.Q4_1 "
                     "(use --skip-sha to generate for another model)")
    corpora = a.corpora
    if corpora is None:
        shared = os.environ.get("HSQ_SHARED") or os.path.join(REPO, "..", "shared")
        corpora = os.path.join(shared, "corpora")
    if not os.path.isdir(corpora):
        sys.exit(f"make_golden: corpora directory {corpora} not found (use --corpora)")
    out = a.out
    os.makedirs(os.path.join(out, "logits"), exist_ok=True)
    summary = []

    def say(s):
        log(s)
        summary.append(s)

    say(f"# make_golden.py: llama-cpp-python {llama_cpp.__version__}, numpy {np.__version__}, "
        f"model {os.path.basename(a.model)}")
    vocab = Llama(model_path=a.model, vocab_only=True, verbose=False)

    def tok(b):
        return vocab.tokenize(b, add_bos=False, special=True)

    # ----------------------------------------------------------- tokens
    rows = []
    for name, text in EDGE_CASES:
        b = text.encode("utf-8")
        rel = f"tok/{name}.txt"
        write_bytes(os.path.join(out, rel), b)
        ids = tok(b)
        rows.append((name, rel, 0, len(b), fnv1a64(b), ids))
    for name, src, off, length in CORPUS_CASES:
        data = open(os.path.join(corpora, src), "rb").read()
        start, n, s = corpus_slice(data, off, length)
        ids = tok(s)
        rows.append((name, "corpora:" + src, start, n, fnv1a64(s), ids))
    with open(os.path.join(out, "tokens.tsv"), "w") as f:
        f.write("# tokenization golden: llama.cpp tokenize(bytes, add_bos=False, special=True)\n")
        f.write("# name\tsource\toffset\tlength\tfnv1a64\tn_ids\tids\n")
        for name, src, off, n, h, ids in rows:
            f.write(f"{name}\t{src}\t{off}\t{n}\t{h}\t{len(ids)}\t{ids_str(ids)}\n")
    say(f"tokens: {len(EDGE_CASES)} edge cases, {len(CORPUS_CASES)} corpus cases, "
        f"{sum(len(r[5]) for r in rows)} ids")

    # ----------------------------------------------------------- prompts
    npm = None
    if not a.no_numpy:
        from numpy_llama import NumpyLlama
        t0 = time.time()
        npm = NumpyLlama(a.model, dtype=np.float64)
        log(f"numpy model loaded in {time.time() - t0:.1f}s")
    ref = LlamaRef(a.model, 2048)
    lrows, grows = [], []
    worst_mx, worst_cos = 0.0, 1.0
    for name, text, has_logits in PROMPTS:
        b = text.encode("utf-8")
        rel = f"prompts/{name}.txt"
        write_bytes(os.path.join(out, rel), b)
        ids = tok(b)
        first, gen, gaps = ref.run(ids, N_GEN)
        np_gen, np_gaps, np_first = None, None, None
        if npm is not None:
            np_gen, np_gaps, np_first = npm.greedy(ids, N_GEN)
            np_first = np_first.astype(np.float32)
        if has_logits:
            lf = f"logits/{name}.f32"
            first.astype("<f4").tofile(os.path.join(out, lf))
            nf = "-"
            top10 = [int(i) for i in np.argsort(-first, kind="stable")[:10]]
            np_top10 = "-"
            if np_first is not None:
                nf = f"logits/{name}.np.f32"
                np_first.astype("<f4").tofile(os.path.join(out, nf))
                np_top10 = ids_str(np.argsort(-np_first, kind="stable")[:10])
                mx, cos = compare(first, np_first)
                worst_mx, worst_cos = max(worst_mx, mx), min(worst_cos, cos)
                rng = float(first.max() - first.min())
                say(f"logits {name}: {len(ids)} tokens, llama.cpp vs numpy max abs {mx:.4f} "
                    f"(logit range {rng:.2f}, rel {mx / rng:.2e}), cosine {cos:.7f}, "
                    f"argmax {top10[0]} vs {int(np.argmax(np_first))}")
            lrows.append((name, rel, ids, top10, lf, nf, np_top10))
        g = f"greedy {name}: {len(ids)} tokens, min top-2 gap {min(gaps):.4f}"
        if np_gen is not None:
            d = first_diff(gen, np_gen)
            g += (f", numpy agrees (numpy min gap {min(np_gaps):.4f})" if d < 0 else
                  f", NUMPY DIVERGES at step {d} (llama.cpp gap {gaps[d]:.4f}, numpy gap {np_gaps[d]:.4f})")
        say(g)
        grows.append((name, rel, ids, gen, gaps, np_gen, np_gaps))
    if npm is not None:
        say(f"logits worst case over prompts: max abs {worst_mx:.4f}, cosine {worst_cos:.7f}")

    with open(os.path.join(out, "logits.tsv"), "w") as f:
        f.write("# final-position logits of llama.cpp (n_ctx 2048, f16 KV, 2 threads) and numpy_llama.py (fp64)\n")
        f.write("# name\tprompt\tn_tokens\ttokens\ttop10\tlogits\tnp_logits\tnp_top10\n")
        for name, rel, ids, top10, lf, nf, npt in lrows:
            f.write(f"{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{ids_str(top10)}\t{lf}\t{nf}\t{npt}\n")
    with open(os.path.join(out, "greedy.tsv"), "w") as f:
        f.write("# greedy (argmax, ties to lowest id) continuations; gap = top1 - top2 logit at each step\n")
        f.write("# name\tprompt\tn_tokens\ttokens\tn_gen\tids\tgaps\tnp_ids\tnp_gaps\n")
        for name, rel, ids, gen, gaps, npg, npgaps in grows:
            f.write(f"{name}\t{rel}\t{len(ids)}\t{ids_str(ids)}\t{len(gen)}\t{ids_str(gen)}\t{gaps_str(gaps)}"
                    f"\t{ids_str(npg) if npg else '-'}\t{gaps_str(npgaps) if npg else '-'}\n")

    # ----------------------------------------------------------- resume
    write_bytes(os.path.join(out, "prompts/passage_doc.txt"), PASSAGE.encode("utf-8"))
    ref8k = LlamaRef(a.model, 8192)
    rrows = []
    for name, src, off, length, q in RESUME_DOCS:
        kind, rel = src.split(":", 1)
        base = out if kind == "golden" else corpora
        data = open(os.path.join(base, rel), "rb").read()
        if length is None:
            start, n, s = 0, len(data), data
        else:
            start, n, s = corpus_slice(data, off, length)
        qb = QUESTION.format(q=q).encode("utf-8")
        prel = f"prompts/resume_{name}.txt"
        write_bytes(os.path.join(out, prel), qb)
        doc_ids, q_ids = tok(s), tok(qb)
        ids = doc_ids + q_ids
        t0 = time.time()
        _, gen, gaps = ref8k.run(ids, N_GEN)
        np_gen = np_gaps = None
        if npm is not None:
            np_gen, np_gaps, _ = npm.greedy(ids, N_GEN)
        g = (f"resume {name}: {len(doc_ids)} doc + {len(q_ids)} prompt tokens, "
             f"min top-2 gap {min(gaps):.4f}")
        if np_gen is not None:
            d = first_diff(gen, np_gen)
            g += (f", numpy agrees (numpy min gap {min(np_gaps):.4f})" if d < 0 else
                  f", NUMPY DIVERGES at step {d} (llama.cpp gap {gaps[d]:.4f}, numpy gap {np_gaps[d]:.4f})")
        say(g + f" [{time.time() - t0:.0f}s]")
        rrows.append((name, src if kind == "corpora" else rel, start, n, fnv1a64(s), prel, doc_ids, q_ids, gen, gaps, np_gen, np_gaps))
    with open(os.path.join(out, "resume.tsv"), "w") as f:
        f.write("# snapshot-resume documents: tokens = tokenize(doc) + tokenize(prompt); greedy as in greedy.tsv\n")
        f.write("# name\tsource\toffset\tlength\tfnv1a64\tprompt\tn_doc\tn_prompt\ttokens\tn_gen\tids\tgaps\tnp_ids\tnp_gaps\n")
        for (name, src, off, n, h, prel, d_ids, q_ids, gen, gaps, npg, npgaps) in rrows:
            f.write(f"{name}\t{src}\t{off}\t{n}\t{h}\t{prel}\t{len(d_ids)}\t{len(q_ids)}\t"
                    f"{ids_str(d_ids + q_ids)}\t{len(gen)}\t{ids_str(gen)}\t{gaps_str(gaps)}\t"
                    f"{ids_str(npg) if npg else '-'}\t{gaps_str(npgaps) if npg else '-'}\n")

    # ----------------------------------------------------------- f32 cross-check
    if a.verify_f32 and npm is not None:
        import tempfile
        from dequant_gguf import convert
        tmp = os.path.join(tempfile.gettempdir(), "hsq-golden-f32.gguf")
        convert(a.model, tmp)
        lf32 = Llama(model_path=tmp, n_ctx=2048, logits_all=False, n_threads=2, seed=0,
                     verbose=False, type_k=0, type_v=0)
        for name, text, has_logits in PROMPTS:
            if not has_logits:
                continue
            ids = tok(text.encode("utf-8"))
            lf32.reset()
            lf32.eval(ids)
            lg = np.ctypeslib.as_array(lf32._ctx.get_logits_ith(-1), shape=(lf32.n_vocab(),)).copy()
            npl = npm.forward(ids, npm.new_cache(), all_logits=False)
            mx, cos = compare(lg, npl)
            say(f"f32 check {name}: llama.cpp on the all-F32 model (F32 KV) vs numpy: "
                f"max abs {mx:.2e}, cosine {cos:.9f}")
        del lf32
        os.unlink(tmp)

    with open(os.path.join(out, "agreement.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
