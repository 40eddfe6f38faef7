#!/bin/sh
# run.sh BINDIR MODEL [GEMMA] - `make bench`, per model:
#   1. the runtime (build/bench/bench_runtime): prefill and decode tokens/s,
#      peak RSS, snapshot size and load time, one process per length;
#   2. hsq-eval bench: decode tokens/s and bytes of the methods full, quant
#      and hsq (HSQ_BENCH_DECODE steps, default 64, the best of
#      HSQ_BENCH_REPEAT rounds, default 5, the methods in turn);
#   3. build/bench/roofline on that log: the machine's memory bandwidth, the
#      bytes each decode step reads, and the share of the limit reached;
#   4. llama.cpp (bench/llama_cpp_bench.py, llama-cpp-python; set
#      HSQ_LLAMA_PY to a python that has it, see tests/ref/README.md) on the
#      token ids bench_runtime wrote, in the KV configurations of
#      HSQ_LLAMA_CONFIGS (default f16,f16+fa,q8_0+fa,q4_0+fa), the same
#      threads, decode steps and rounds;
#   5. one table of ratios to llama.cpp's fastest configuration: prefill
#      against all of them, decode of full, quant and hsq against the
#      uncompressed ones (f16, f16+fa), and hsq's decode against all.
# Without llama_cpp, steps 4-5 print a SKIP line. The default model at 512,
# 2K and 8K tokens; gemma-3-270m (if given and present) at 2K, 8K and 32K.
# HSQ_BENCH_LENS and HSQ_BENCH_GEMMA_LENS override the lengths,
# HSQ_BENCH_THREADS the threads, HSQ_BENCH_TEXT the text.
set -eu
bin=${1:?usage: run.sh BINDIR MODEL [GEMMA]}
model=${2:?usage: run.sh BINDIR MODEL [GEMMA]}
gemma=${3:-}
threads=${HSQ_BENCH_THREADS:-$(nproc)}
decode=${HSQ_BENCH_DECODE:-64}
repeat=${HSQ_BENCH_REPEAT:-5}
configs=${HSQ_LLAMA_CONFIGS:-f16,f16+fa,q8_0+fa,q4_0+fa}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
text=${HSQ_BENCH_TEXT:-../shared/corpora/moby-dick.txt}
[ -f "$text" ] || text=share/sample-document.txt
py=${HSQ_LLAMA_PY:-python3}
mkdir -p bench/out
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads $threads; decode $decode steps, best of $repeat rounds; text $text"
if "$py" -c 'import llama_cpp' 2>/dev/null; then
	have_llama=1
	echo "llama.cpp: llama-cpp-python $("$py" -c 'import llama_cpp; print(llama_cpp.__version__)') ($py); configurations $configs"
else
	have_llama=0
fi

# ratios TAG MODEL: the final table, from bench/out/hsq-TAG.txt (bench_runtime),
# bench/out/eval-TAG.jsonl (hsq-eval bench) and bench/out/llama-TAG.txt
ratios() {
	python3 - "bench/out/hsq-$1.txt" "bench/out/eval-$1.jsonl" "bench/out/llama-$1.txt" "$2" "$decode" <<'EOF'
import json, math, sys
hsq_path, eval_path, llama_path, model = sys.argv[1:5]
decode = int(sys.argv[5])
uncompressed = ("f16", "f16+fa")
prefill = {}  # length -> bench_runtime prefill tok/s
for row in open(hsq_path).read().splitlines()[1:]:
    f = row.split()
    prefill[int(f[0])] = float(f[1])
evals = {}  # length -> {method: decode tok/s}
for line in open(eval_path):
    r = json.loads(line)
    if r.get("record") == "length":
        evals[r["length"]] = {m: v["decode_tok_s"] for m, v in r["methods"].items()}
llama = {}  # length -> {config: (prefill, decode)}
for row in open(llama_path).read().splitlines()[1:]:
    f = row.split()
    if len(f) == 4 and not math.isnan(float(f[3])):
        llama.setdefault(int(f[1]), {})[f[0]] = (float(f[2]), float(f[3]))

def best(length, which, among=None):
    """llama.cpp's fastest configuration at length: (tok/s, name), or None."""
    c = [(v[which], k) for k, v in llama.get(length, {}).items() if among is None or k in among]
    return max(c) if c else None

def cell(num, den):
    """num / llama.cpp's best, and the configuration that was."""
    return (f"{num / den[0]:.2f}x {den[1]}" if num is not None and den else "-").ljust(16)

print(f"== ratio hsq / llama.cpp ({model}), to llama.cpp's fastest configuration (named)")
print(f"{'context':<8} {'prefill':<16} {'full decode':<16} {'quant decode':<16} {'hsq decode':<16} hsq vs all")
notes = []
for length in sorted(prefill):
    # hsq-eval caps a length at the model's context less the decode steps
    near = [k for k in evals if length - decode - 1 <= k <= length]
    ev = evals.get(length) or (evals[max(near)] if near else {})
    if ev and length not in evals:
        notes.append(f"{length}: hsq-eval bench ran {max(near)} (capped at the model's context less the first step and {decode} decode steps)")
    unc = best(length, 1, uncompressed)
    print(f"{length:<8} {cell(prefill[length], best(length, 0))} "
          + " ".join(cell(ev.get(m), unc) for m in ("full", "quant", "hsq"))
          + f" {cell(ev.get('hsq'), best(length, 1))}".rstrip())
print("prefill: bench_runtime against the fastest of all configurations; full, quant and hsq decode: hsq-eval\n"
      "bench against the fastest uncompressed configuration (f16, f16+fa); hsq vs all: hsq's decode against the\n"
      "fastest of all, compressed KV included. '-': not measured.")
for n in notes:
    print("note: " + n)
EOF
}

# bench_one MODEL LENS TAG: the runtime, hsq-eval bench, roofline, llama.cpp, ratios
bench_one() {
	m=$1 lens=$2 tag=$3
	echo "== hsq runtime ($(basename "$m"); build/bench/bench_runtime, 32 decode steps)"
	: > "bench/out/hsq-$tag.txt"
	for L in $lens; do
		# one process per length, so each gets its own peak RSS
		/usr/bin/time -f '%M' -o "bench/out/rss-$tag-$L.txt" "$BUILD_BENCH"/bench_runtime "$m" "$threads" "$text" "$L" \
			> bench/out/one.txt
		[ -s "bench/out/hsq-$tag.txt" ] || head -n 1 bench/out/one.txt | sed 's/$/  peak RSS MiB/' > "bench/out/hsq-$tag.txt"
		printf '%s %14.0f\n' "$(tail -n 1 bench/out/one.txt)" "$(($(cat "bench/out/rss-$tag-$L.txt") / 1024))" \
			>> "bench/out/hsq-$tag.txt"
	done
	cat "bench/out/hsq-$tag.txt"

	echo "== hsq per method ($(basename "$m"); hsq-eval bench)"
	"$bin"/hsq-eval bench -m "$m" -t "$threads" --methods full,quant,hsq --decode "$decode" --repeat "$repeat" \
		--lengths "$(echo "$lens" | xargs | tr ' ' ',')" --text "$text" --log "bench/out/eval-$tag.jsonl" --force -q
	echo "== roofline ($(basename "$m"))"
	"$BUILD_BENCH"/roofline --threads "$threads" --log "bench/out/eval-$tag.jsonl" "$m"

	if [ "$have_llama" -eq 0 ]; then
		echo "SKIP: llama.cpp comparison and ratios (no llama_cpp module for $py; set HSQ_LLAMA_PY)"
		return 0
	fi
	echo "== llama.cpp ($(basename "$m"); $decode decode steps, best of $repeat rounds)"
	# a crash (a build for another CPU dies of SIGILL) or a refused
	# configuration must not pass unnoticed: check the status and the
	# rows, and the ratios use only the rows measured
	status=0
	# shellcheck disable=SC2086
	"$py" bench/llama_cpp_bench.py --configs "$configs" --decode "$decode" --repeat "$repeat" "$m" "$threads" $lens \
		> "bench/out/llama-$tag.txt" || status=$?
	cat "bench/out/llama-$tag.txt"
	n_conf=$(echo "$configs" | tr ',' '\n' | grep -c .)
	n_lens=$(echo "$lens" | wc -w)
	if [ "$status" -ne 0 ] || [ "$(wc -l < "bench/out/llama-$tag.txt")" -ne $((1 + n_conf * n_lens)) ]; then
		echo "run.sh: llama.cpp run failed (exit $status) for $(basename "$m"); ratios from the rows measured (is llama-cpp-python built for this CPU? see tests/ref/README.md)" >&2
		llama_failed=1
	fi
	ratios "$tag" "$(basename "$m")"
}

llama_failed=0
bench_one "$model" "${HSQ_BENCH_LENS:-512 2048 8192}" default
if [ -n "$gemma" ] && [ -f "$gemma" ]; then
	bench_one "$gemma" "${HSQ_BENCH_GEMMA_LENS:-2048 8192 32768}" gemma
else
	echo "SKIP: gemma-3-270m figures (run 'make gemma')"
fi
# the hsq figures above stand; a failed comparison still fails the target
[ "$llama_failed" -eq 0 ]
