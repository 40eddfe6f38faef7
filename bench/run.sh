#!/bin/sh
# run.sh BINDIR MODEL - `make bench`: prefill/decode tokens/s of hsq at
# 512, 2K and 8K tokens, next to llama.cpp on the same machine, threads and
# tokens when llama-cpp-python is importable (set HSQ_LLAMA_PY to a python
# that has it; see tests/ref/README.md), with ratios.
set -eu
bin=${1:?usage: run.sh BINDIR MODEL}
model=${2:?usage: run.sh BINDIR MODEL}
threads=${HSQ_BENCH_THREADS:-$(nproc)}
lens=${HSQ_BENCH_LENS:-512 2048 8192}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
text=${HSQ_BENCH_TEXT:-../shared/corpora/moby-dick.txt}
[ -f "$text" ] || text=share/sample-document.txt
py=${HSQ_LLAMA_PY:-python3}
mkdir -p bench/out
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads $threads; text $text"
echo "== hsq ($(basename "$model"))"
# one process per length, so each gets its own peak RSS
: > bench/out/hsq.txt
for L in $lens; do
	/usr/bin/time -f '%M' -o bench/out/rss-$L.txt "$BUILD_BENCH"/bench_runtime "$model" "$threads" "$text" "$L" > bench/out/one.txt
	[ -s bench/out/hsq.txt ] || head -n 1 bench/out/one.txt | sed 's/$/  peak RSS MiB/' > bench/out/hsq.txt
	printf '%s %14.0f\n' "$(tail -n 1 bench/out/one.txt)" "$(($(cat bench/out/rss-$L.txt) / 1024))" >> bench/out/hsq.txt
done
cat bench/out/hsq.txt
if "$py" -c 'import llama_cpp' 2>/dev/null; then
	echo "== llama.cpp (llama-cpp-python $("$py" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
	"$py" bench/llama_cpp_bench.py "$model" "$threads" $lens | tee bench/out/llama.txt
	echo "== ratio hsq / llama.cpp"
	paste bench/out/hsq.txt bench/out/llama.txt | awk 'NR == 1 { printf "%-8s %14s %14s\n", "context", "prefill", "decode"; next }
		{ printf "%-8s %13.2fx %13.2fx\n", $1, $2 / $9, $3 / $10 }'
else
	echo "SKIP: llama.cpp comparison (no llama_cpp module for $py; set HSQ_LLAMA_PY)"
fi
