#!/bin/sh
# run.sh BINDIR MODEL [GEMMA] - `make bench`: prefill/decode tokens/s, peak
# RSS, snapshot size and load time of hsq, next to llama.cpp on the same
# machine, threads and tokens when llama-cpp-python is importable (set
# HSQ_LLAMA_PY to a python that has it; see tests/ref/README.md), with
# ratios. The default model at 512, 2K and 8K tokens; gemma-3-270m (if
# given and present) at 2K, 8K and 32K. HSQ_BENCH_LENS and
# HSQ_BENCH_GEMMA_LENS override the lengths, HSQ_BENCH_THREADS the threads.
set -eu
bin=${1:?usage: run.sh BINDIR MODEL [GEMMA]}
model=${2:?usage: run.sh BINDIR MODEL [GEMMA]}
gemma=${3:-}
threads=${HSQ_BENCH_THREADS:-$(nproc)}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
text=${HSQ_BENCH_TEXT:-../shared/corpora/moby-dick.txt}
[ -f "$text" ] || text=share/sample-document.txt
py=${HSQ_LLAMA_PY:-python3}
mkdir -p bench/out
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads $threads; text $text"

# bench_one MODEL LENS TAG: hsq, then llama.cpp, then ratios
bench_one() {
	m=$1 lens=$2 tag=$3
	echo "== hsq ($(basename "$m"))"
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
	if "$py" -c 'import llama_cpp' 2>/dev/null; then
		echo "== llama.cpp (llama-cpp-python $("$py" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
		# a crash (a build for another CPU dies of SIGILL) must not turn
		# into ratios over empty columns: check the status and the rows
		status=0
		# shellcheck disable=SC2086
		"$py" bench/llama_cpp_bench.py "$m" "$threads" $lens > "bench/out/llama-$tag.txt" || status=$?
		cat "bench/out/llama-$tag.txt"
		if [ "$status" -ne 0 ] || [ "$(wc -l < "bench/out/llama-$tag.txt")" -ne "$(wc -l < "bench/out/hsq-$tag.txt")" ]; then
			echo "run.sh: llama.cpp run failed (exit $status) for $(basename "$m"); no ratios (is llama-cpp-python built for this CPU? see tests/ref/README.md)" >&2
			llama_failed=1
			return 0
		fi
		echo "== ratio hsq / llama.cpp"
		paste "bench/out/hsq-$tag.txt" "bench/out/llama-$tag.txt" |
			awk 'NR == 1 { printf "%-8s %14s %14s\n", "context", "prefill", "decode"; next }
			{ printf "%-8s %13.2fx %13.2fx\n", $1, $2 / $9, $3 / $10 }'
	else
		echo "SKIP: llama.cpp comparison (no llama_cpp module for $py; set HSQ_LLAMA_PY)"
	fi
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
