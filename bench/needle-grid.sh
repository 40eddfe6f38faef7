#!/bin/sh
# needle-grid.sh LENGTH [FIRST-LAST] - one row of the needle grid in
# BENCHMARKS.md (hsq-eval needle, the evaluation issue's documented run):
# context LENGTH tokens, depths 10,30,50,70,90%, trial indices FIRST to LAST
# of 100 per cell (default 0-99), the five methods, seed 1, haystacks cut
# from the first 40 State of the Union addresses of the 1800s in
# ../shared/corpora/sotu/. Another model, trial count or set of methods
# through the environment (below), e.g. gemma-3-270m's 32K row:
#     HSQ_NEEDLE_MODEL=~/.local/share/hsq/models/gemma-3-270m-q4_k_m.gguf \
#     HSQ_NEEDLE_TRIALS=50 HSQ_NEEDLE_METHODS=full,quant,hsq HSQ_NEEDLE_BLOCK=5 \
#     bench/needle-grid.sh 32768
#
# A row takes hours on two cores (with two workers on the 2-core VM a trial is
# about 28 s of wall time at 4K, 57 s at 8K, about 8 hours for the 8K row),
# more than one session, so the trials run in blocks of ten indices, each
# block a resumable hsq-eval run over all five depths: stopped at any point,
# every cell has grown by whole blocks but for the block in flight, and
# running the same command again picks up where the log ends (--resume skips
# what the log holds). The log is
# bench/results/needle-<L/1024>k-5methods.jsonl (another model's:
# needle-<L/1024>k-<its file name less .gguf>.jsonl), the table of the last block
# (over every trial in the log) goes to the matching .out file.
#
# The log grows uncompressed while the row runs. Once the row is complete
# (100 trials in every cell) it is compressed and committed as the .jsonl.zst
# beside it, and the .jsonl is not committed:
#     zstd -19 -f --rm bench/results/needle-8k-5methods.jsonl
# To run more trials of a row whose log is committed compressed, run the
# script as usual: where LOG is absent and LOG.zst exists it decompresses
# LOG.zst to LOG first (it needs zstd) and resumes from there; compress again
# when the run is done. bench/needle-grid-report.sh reads either form.
#
# Environment: HSQ_EVAL (default build/bin/hsq-eval), HSQ_NEEDLE_JOBS worker
# processes (default: the cores), HSQ_NEEDLE_LOG (the log; a name ending in
# .zst stands for the log it decompresses to), HSQ_NEEDLE_BLOCK (indices per
# block, default 10), HSQ_NEEDLE_MODEL (the GGUF; default hsq-eval's),
# HSQ_NEEDLE_TRIALS (trials a cell, default 100), HSQ_NEEDLE_METHODS (default
# full,quant,hsq,streaming,snapkv); a relative path is taken from the
# directory the script is run in.
set -eu
usage() {
	echo "usage: bench/needle-grid.sh LENGTH [FIRST-LAST]   (e.g. 8192 0-99; indices below HSQ_NEEDLE_TRIALS)" >&2
	exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
len=$1
trials=${HSQ_NEEDLE_TRIALS:-100}
case $trials in '' | *[!0-9]*) usage ;; esac
[ "$trials" -ge 1 ] || usage
range=${2:-0-$((trials - 1))}
case $len in '' | *[!0-9]*) usage ;; esac
first=${range%-*}
last=${range#*-}
case $first$last in '' | *[!0-9]*) usage ;; esac
[ "$first" -le "$last" ] && [ "$last" -lt "$trials" ] || usage
methods=${HSQ_NEEDLE_METHODS:-full,quant,hsq,streaming,snapkv}

# paths given in the environment are the caller's, relative to where it runs
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
eval_bin=
[ -z "${HSQ_EVAL:-}" ] || eval_bin=$(abspath "$HSQ_EVAL")
log=
[ -z "${HSQ_NEEDLE_LOG:-}" ] || log=$(abspath "$HSQ_NEEDLE_LOG")
model=
[ -z "${HSQ_NEEDLE_MODEL:-}" ] || model=$(abspath "$HSQ_NEEDLE_MODEL")
jobs=${HSQ_NEEDLE_JOBS:-$(nproc)}
block=${HSQ_NEEDLE_BLOCK:-10}
case $jobs$block in '' | *[!0-9]*) usage ;; esac
[ "$jobs" -ge 1 ] && [ "$block" -ge 1 ] || usage

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
eval_bin=${eval_bin:-build/bin/hsq-eval}
if [ -n "$model" ]; then
	name=$(basename "$model" .gguf)
	log=${log:-bench/results/needle-$((len / 1024))k-$name.jsonl}
fi
log=${log:-bench/results/needle-$((len / 1024))k-5methods.jsonl}
log=${log%.zst}
out=${log%.jsonl}.out
[ -x "$eval_bin" ] || { echo "needle-grid.sh: $eval_bin is not built; run make first" >&2; exit 1; }
if ! ls ../shared/corpora/sotu/18[0-9][0-9]_*.txt > /dev/null 2>&1; then
	echo "SKIP: needle-grid.sh: ../shared/corpora/sotu/ is absent (the haystacks are read from it)"
	exit 0
fi
mkdir -p "$(dirname "$log")"
hay=$(ls ../shared/corpora/sotu/18[0-9][0-9]_*.txt | head -n 40 | paste -sd, -)

# A block runs in the background so that a signal to this script reaches it
# at once (a foreground child would make the shell wait for it, and a
# signal that kills the shell skips the EXIT trap): the block in flight is
# stopped, its finished trials stay in the log.
child=
trap 'rm -f "$out.tmp" "$log.unzst"' EXIT
stop() {
	[ -z "$child" ] || kill -TERM "$child" 2> /dev/null || :
	exit "$1"
}
trap 'stop 129' HUP
trap 'stop 130' INT
trap 'stop 143' TERM
# a row committed compressed: resume from its trials
if [ ! -e "$log" ] && [ -s "$log.zst" ]; then
	command -v zstd > /dev/null 2>&1 || { echo "needle-grid.sh: $log.zst needs zstd to be decompressed" >&2; exit 1; }
	echo "needle-grid.sh: decompressing $log.zst to $log" >&2
	zstd -q -d -c -- "$log.zst" > "$log.unzst"
	mv "$log.unzst" "$log"
fi
resume=
[ -s "$log" ] && resume=--resume
a=$first
while [ "$a" -le "$last" ]; do
	b=$((a + block - 1))
	[ "$b" -le "$last" ] || b=$last
	# one thread a worker: trials side by side beat threads within a trial
	# (BENCHMARKS.md, under the needle grid)
	echo "needle-grid.sh: length $len, trials $a-$b, $(date -u '+%Y-%m-%d %H:%M:%S') UTC" >&2
	"$eval_bin" needle ${model:+-m "$model"} --haystack "$hay" --lengths "$len" --trials "$trials" \
		--only-trials "$a-$b" --jobs "$jobs" -t 1 --methods "$methods" --log "$log" $resume > "$out.tmp" &
	child=$!
	wait "$child"
	child=
	mv "$out.tmp" "$out"
	resume=--resume
	a=$((b + 1))
done
cat "$out"
if [ "$last" -eq $((trials - 1)) ]; then
	echo "needle-grid.sh: if every cell now holds its $trials trials, compress the log for the commit: zstd -19 -f --rm $log" >&2
fi
