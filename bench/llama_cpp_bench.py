#!/usr/bin/env python3
"""llama_cpp_bench.py [--configs LIST] [--decode N] [--repeat R] MODEL THREADS LEN... -
the measurement of bench_runtime.c and hsq-eval bench with llama.cpp
(llama-cpp-python), on the token ids that bench_runtime wrote to
bench/out/tokens-LEN.txt (LEN-32 tokens): prefill them, then one greedy
step and N more, timed (default 64, as hsq-eval bench --decode 64), in each KV
configuration of LIST (default f16,f16+fa,q8_0+fa,q4_0+fa):

  f16       fp16 K and V, flash attention off
  f16+fa    fp16 K and V, flash attention on
  q8_0+fa   q8_0 K and V (8.5 bits), flash attention on
  q4_0+fa   q4_0 K and V (4.5 bits), flash attention on

llama.cpp quantizes V only with flash attention, so q8_0 and q4_0 need +fa.
With --repeat R the decode steps run R times from the end of the prefill
(the cache cut back to it, the same tokens each time) and the best rate
counts, as hsq-eval bench --repeat R does.
Prints one row per (length, configuration): prefill and decode tokens/s.
A configuration llama.cpp refuses prints a row of nan (the reason on
stderr), and the exit status is then 1."""
import argparse
import sys
import time

import llama_cpp
import numpy as np

# GGML type ids of the KV cache types (ggml.h enum ggml_type)
KV_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}
DEFAULT_CONFIGS = "f16,f16+fa,q8_0+fa,q4_0+fa"


def parse_config(name):
    """'TYPE' or 'TYPE+fa' -> (ggml type id, flash attention)."""
    kv, _, fa = name.partition("+")
    if kv not in KV_TYPES or fa not in ("", "fa"):
        raise ValueError(f"config '{name}' is not TYPE or TYPE+fa with TYPE one of {', '.join(KV_TYPES)}")
    if kv != "f16" and not fa:
        raise ValueError(f"config '{name}' needs flash attention (llama.cpp quantizes V only with it); "
                         f"use {kv}+fa")
    return KV_TYPES[kv], fa == "fa"


def run(model, threads, toks, n_decode, kv_type, flash, repeat):
    """Prefill and decode tokens/s of one configuration (decode: the best of repeat rounds)."""
    llm = llama_cpp.Llama(model_path=model, n_ctx=len(toks) + 1 + n_decode, n_batch=512, n_ubatch=512,
                          n_threads=threads, n_threads_batch=threads, flash_attn=flash, type_k=kv_type,
                          type_v=kv_type, verbose=False, logits_all=False)

    def argmax():
        # the last evaluated position's logits (llm.scores keeps only a batch)
        return int(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).argmax())

    try:
        t0 = time.perf_counter()
        llm.eval(toks)
        t_prefill = time.perf_counter() - t0
        first = argmax()
        best = 0.0
        for _ in range(repeat):
            llm.n_tokens = len(toks)  # eval drops the cache past n_tokens
            llm.eval([first])  # the first step apart, as hsq-eval bench times it
            nxt = argmax()
            t0 = time.perf_counter()
            for _ in range(n_decode):
                llm.eval([nxt])
                nxt = argmax()
            best = max(best, n_decode / (time.perf_counter() - t0))
    finally:
        llm.close()
    return len(toks) / t_prefill, best


def main():
    ap = argparse.ArgumentParser(prog="llama_cpp_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"KV configurations (default {DEFAULT_CONFIGS})")
    ap.add_argument("--decode", type=int, default=64, help="greedy decode steps timed (default 64)")
    ap.add_argument("--repeat", type=int, default=1, help="decode rounds, the best counts (default 1)")
    ap.add_argument("model")
    ap.add_argument("threads", type=int)
    ap.add_argument("lengths", type=int, nargs="+")
    a = ap.parse_args()
    if a.decode < 1:
        ap.error(f"--decode {a.decode} is not 1 or more")
    if a.repeat < 1:
        ap.error(f"--repeat {a.repeat} is not 1 or more")
    try:
        configs = [(c, *parse_config(c)) for c in a.configs.split(",") if c]
    except ValueError as e:
        ap.error(str(e))
    if not configs:
        ap.error(f"--configs '{a.configs}' names no configuration")
    failed = 0
    print(f"{'config':<9} {'context':<8} {'prefill tok/s':>14} {'decode tok/s':>14}")
    for length in a.lengths:
        path = f"bench/out/tokens-{length}.txt"
        try:
            toks = [int(x) for x in open(path).read().split()]
        except OSError as e:
            sys.exit(f"llama_cpp_bench.py: cannot read {path} ({e.strerror}); bench_runtime writes it")
        for name, kv_type, flash in configs:
            try:
                prefill, decode = run(a.model, a.threads, toks, a.decode, kv_type, flash, a.repeat)
            except (ValueError, RuntimeError) as e:
                print(f"llama_cpp_bench.py: {name} at {length}: {e}", file=sys.stderr)
                prefill = decode = float("nan")
                failed = 1
            print(f"{name:<9} {length:<8} {prefill:14.1f} {decode:14.1f}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
