#!/usr/bin/env python3
"""llama_cpp_bench.py MODEL THREADS LEN... - the same measurement as
bench_runtime.c with llama.cpp (llama-cpp-python), on the token ids that
bench_runtime wrote to bench/out/tokens-LEN.txt: prefill LEN-32 tokens,
then 32 greedy decode steps. Prints the same table."""
import sys
import time

import llama_cpp
import numpy as np

N_DECODE = 32
model, threads, lens = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
print(f"{'context':<8} {'prefill tok/s':>14} {'decode tok/s':>14}")
for L in lens:
    toks = [int(x) for x in open(f"bench/out/tokens-{L}.txt").read().split()]
    llm = llama_cpp.Llama(model_path=model, n_ctx=L, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False, logits_all=False)
    t0 = time.perf_counter()
    llm.eval(toks)
    t_prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(N_DECODE):
        # the last evaluated position's logits (llm.scores keeps only a batch)
        nxt = int(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).argmax())
        llm.eval([nxt])
    t_decode = time.perf_counter() - t0
    print(f"{L:<8} {len(toks) / t_prefill:14.1f} {N_DECODE / t_decode:14.1f}", flush=True)
    del llm
