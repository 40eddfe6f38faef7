#!/usr/bin/env python3
"""tiers_pool.py OUT... - pools the per-document rows of several
bench/tiers_quality outputs (runs over disjoint documents with the same
N_CTX, N_CONT and N_GEN) into one summary, as one run over all of them
would print it.

Every document scores the same number of tokens and generates the same
number, so: perplexity = exp(mean over documents of log ppl) (the pooled
NLL), agreement = mean, decode tok/s = documents / sum of 1/rate (total
steps over total time), recall = mean of the documents' recall; the
per-layer recall is the document-weighted mean of each run's line.
A document is named by the directory its output is in and the name the
output gives it (sets of samples whose files share names, sample-00.txt
and on, are kept apart by keeping each set's outputs in a directory of
its own); a document that appears twice under one name is an error
(exit 2)."""
import math
import os
import re
import sys

ROW = re.compile(r"^(\S+)\s+(full|quant|hsq|streaming|snapkv)\s+([0-9.]+)\s+([0-9.]+)\s+(-?\d+)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)$")
HEAD = re.compile(r"^# model .*, generated (\d+),")
SNAP = re.compile(r"^(\S+)\s+snapshot: .*\(([0-9.]+)x of fp16\).*prefill ([0-9.]+) s, load hsq ([0-9.]+) s \(([0-9.]+)x\)")


def main(paths):
    if not paths:
        sys.stderr.write("usage: tiers_pool.py OUT...\n")
        return 2
    rows = {}   # (doc, mode) -> fields
    docs = []   # in order of appearance
    snaps = {}
    layers = []  # (n_docs, [recall per layer])
    for path in paths:
        n_here = set()
        per_layer = None
        n_gen = 0
        where = os.path.basename(os.path.dirname(os.path.abspath(path)))
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                h = HEAD.match(line)
                if h:
                    n_gen = int(h.group(1))
                m = ROW.match(line)
                if m:
                    doc, mode = f"{where}/{m.group(1)}", m.group(2)
                    if (doc, mode) in rows:
                        sys.stderr.write(f"tiers_pool: {path}: {doc} {mode} is in an earlier output too\n")
                        return 2
                    agree = float(m.group(4))
                    if n_gen:  # the printed share has 3 decimals; the count is exact
                        agree = round(agree * n_gen) / n_gen
                    rows[doc, mode] = dict(ppl=float(m.group(3)), agree=agree,
                                           decode=float(m.group(6)), recall=m.group(7),
                                           fast=float(m.group(8)), arch=float(m.group(9)))
                    if doc not in n_here:
                        n_here.add(doc)
                        docs.append(doc)
                    continue
                m = SNAP.match(line)
                if m:
                    snaps[f"{where}/{m.group(1)}"] = (float(m.group(2)), float(m.group(3)), float(m.group(4)),
                                         float(m.group(5)))
                elif line.startswith("recall per layer:"):
                    per_layer = [float(x) for x in line.split(":", 1)[1].split()]
        if per_layer:
            layers.append((len(n_here), per_layer))
    if not docs:
        sys.stderr.write("tiers_pool: no document rows in the outputs\n")
        return 1
    modes = [m for m in ("full", "quant", "hsq", "streaming", "snapkv") if any((d, m) in rows for d in docs)]
    base = {}
    print(f"# pooled over {len(docs)} documents from {len(paths)} output(s)")
    for mode in modes:
        got = [rows[d, mode] for d in docs if (d, mode) in rows]
        ppl = math.exp(sum(math.log(r["ppl"]) for r in got) / len(got))
        agree = sum(r["agree"] for r in got) / len(got)
        decode = len(got) / sum(1.0 / r["decode"] for r in got)
        if mode == "full":
            base = dict(ppl=ppl, decode=decode)
        line = (f"{mode:<6} docs {len(got)}  ppl {ppl:.4f}  ratio-to-full {ppl / base['ppl']:.4f}  "
                f"agreement {agree:.4f} (worst {min(r['agree'] for r in got):.4f})  "
                f"decode {decode:.2f} tok/s ({decode / base['decode']:.2f}x full; per document "
                f"{min(r['decode'] / rows[d, 'full']['decode'] for d, r in zip(docs, got)):.2f}-"
                f"{max(r['decode'] / rows[d, 'full']['decode'] for d, r in zip(docs, got)):.2f}x)  "
                f"fast-tier {sum(r['fast'] for r in got) / len(got):.1f}x  "
                f"fast+archive {sum(r['arch'] for r in got) / len(got):.2f}x")
        ratios = [r["ppl"] / rows[d, "full"]["ppl"] for d, r in zip(docs, got)]
        line += f"  ppl ratio per document {min(ratios):.4f}-{max(ratios):.4f}"
        rec = [float(r["recall"]) for r in got if r["recall"] != "nan"]
        if rec:
            line += f"  recall {sum(rec) / len(rec):.4f} (documents {min(rec):.4f}-{max(rec):.4f})"
        print(line)
    if layers:
        n = sum(k for k, _ in layers)
        pooled = [sum(k * v[i] for k, v in layers) / n for i in range(len(layers[0][1]))]
        print("recall per layer:", " ".join(f"{x:.3f}" for x in pooled))
    if snaps:
        s = [snaps[d] for d in docs if d in snaps]
        print(f"snapshot {min(x[0] for x in s):.3f}-{max(x[0] for x in s):.3f}x of fp16; prefill "
              f"{min(x[1] for x in s):.1f}-{max(x[1] for x in s):.1f} s; load hsq "
              f"{min(x[2] for x in s):.3f}-{max(x[2] for x in s):.3f} s; resume "
              f"{min(x[3] for x in s):.0f}-{max(x[3] for x in s):.0f}x faster than the prefill")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
