#!/bin/sh
# needle-grid-report.sh [OUTDIR] - the rows of the needle grid in
# BENCHMARKS.md, which bench/needle-grid.sh writes one log per context
# length, summarized as one run of every length: the table on stdout and in
# OUTDIR/needle-grid.out, OUTDIR/needle-grid.json and .csv, and the report
# (OUTDIR/report.md and a depth x length heatmap per method). OUTDIR
# defaults to bench/results/needle-grid. Nothing runs: hsq-eval --summarize
# reads the trials the logs hold, so a row still growing is summarized as
# far as it has come (the table says how many of the grid's trials it holds).
#
# A row's log is bench/results/needle-{2,4,8}k-5methods.jsonl while it is
# being run and is committed zstd-compressed (.jsonl.zst) once the row is
# complete; a log named *.zst is read through zstd -dc (zstd must be
# installed), and by default each row's .jsonl is read where it exists,
# its .jsonl.zst otherwise.
#
# The logs are merged into one temporary log of the whole grid. That is
# sound because a trial's needle, haystack offset and question are drawn
# from the seed, its length, depth and index alone (hsq-eval(1)): a row
# run on its own holds the same trials as the grid run would. The script
# checks that the rows' first lines differ in their lengths alone, and
# hsq-eval checks the merged header and every record as --resume does.
#
# Environment: HSQ_EVAL (default build/bin/hsq-eval); HSQ_NEEDLE_LOGS, the
# row logs (.jsonl or .jsonl.zst), space-separated (default: those of the
# three rows that exist); HSQ_NEEDLE_HAYSTACK, the comma-separated
# haystack files (default, as in needle-grid.sh: the first 40 addresses of
# the 1800s in ../shared/corpora/sotu/); HSQ_MODEL, the model (hsq-eval's
# default). The depths, trials per cell and methods are read from the logs;
# the rest of the configuration is hsq-eval's defaults, as needle-grid.sh
# runs it.
set -eu
[ $# -le 1 ] || { echo "usage: bench/needle-grid-report.sh [OUTDIR]" >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
out=$(abspath "${1:-bench/results/needle-grid}")
eval_bin=
[ -z "${HSQ_EVAL:-}" ] || eval_bin=$(abspath "$HSQ_EVAL")
logs=
for f in ${HSQ_NEEDLE_LOGS:-}; do logs="$logs $(abspath "$f")"; done
hay=
for f in $(echo "${HSQ_NEEDLE_HAYSTACK:-}" | tr , ' '); do hay=${hay:+$hay,}$(abspath "$f"); done

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
eval_bin=${eval_bin:-build/bin/hsq-eval}
[ -x "$eval_bin" ] || { echo "needle-grid-report.sh: $eval_bin is not built; run make first" >&2; exit 1; }
if [ -z "$logs" ]; then
	for k in 2 4 8; do
		f=bench/results/needle-${k}k-5methods.jsonl
		[ -s "$f" ] || f=$f.zst
		[ ! -s "$f" ] || logs="$logs $PWD/$f"
	done
fi
[ -n "$logs" ] || { echo "needle-grid-report.sh: no row log; run bench/needle-grid.sh first" >&2; exit 1; }
if [ -z "$hay" ]; then
	if ! ls ../shared/corpora/sotu/18[0-9][0-9]_*.txt > /dev/null 2>&1; then
		echo "SKIP: needle-grid-report.sh: ../shared/corpora/sotu/ is absent (the haystacks are read from it)"
		exit 0
	fi
	hay=$(ls ../shared/corpora/sotu/18[0-9][0-9]_*.txt | head -n 40 | paste -sd, -)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/needle-grid.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# a copy of each log as it is now, decompressed: $tmp/row-N.jsonl for the
# N-th log (a row being run may grow while it is read)
i=0
for f in $logs; do
	i=$((i + 1))
	case $f in
	*.zst)
		command -v zstd > /dev/null 2>&1 || { echo "needle-grid-report.sh: $f: zstd is not installed" >&2; exit 1; }
		zstd -q -d -c -- "$f" > "$tmp/row-$i.jsonl" || { echo "needle-grid-report.sh: $f: cannot decompress it" >&2; exit 1; }
		;;
	*) cat -- "$f" > "$tmp/row-$i.jsonl" ;;
	esac
done

# member NAME of a header, whose value matches the pattern VALUE (a list
# or a number): exactly once, or the log is not one of needle-grid.sh's
member() { # FILE LINE NAME VALUE
	n=$(printf '%s\n' "$2" | grep -o "\"$3\":$4" | wc -l)
	[ "$n" -eq 1 ] || { echo "needle-grid-report.sh: $1: the first line holds $n \"$3\" members, not one; is it a needle log?" >&2; exit 1; }
	printf '%s\n' "$2" | sed "s/.*\"$3\":\($4\).*/\1/; s/[][\"]//g"
}
# every row's lengths, in the order of the logs
lengths=
i=0
for f in $logs; do
	i=$((i + 1))
	l=$(member "$f" "$(head -n 1 "$tmp/row-$i.jsonl")" lengths '\[[0-9,]*\]')
	lengths=${lengths:+$lengths,}$l
done
header=
i=0
for f in $logs; do
	i=$((i + 1))
	h=$(head -n 1 "$tmp/row-$i.jsonl" | sed "s/\"lengths\":\[[0-9,]*\]/\"lengths\":[$lengths]/")
	if [ -z "$header" ]; then
		header=$h
	elif [ "$h" != "$header" ]; then
		echo "needle-grid-report.sh: $f was run with another configuration than the first log (beyond its lengths); compare their first lines" >&2
		exit 1
	fi
done
depths=$(member "$f" "$header" depths '\[[0-9,]*\]')
trials=$(member "$f" "$header" trials '[0-9]*')
methods=$(member "$f" "$header" methods '\[[a-z",]*\]')

# whole lines only: a row being run may have been writing its last one
merged=$tmp/needle-grid.jsonl
printf '%s\n' "$header" > "$merged"
i=0
for f in $logs; do
	i=$((i + 1))
	n=$(wc -l < "$tmp/row-$i.jsonl")
	head -n "$n" "$tmp/row-$i.jsonl" | tail -n +2 >> "$merged"
done

mkdir -p "$out"
"$eval_bin" needle --haystack "$hay" --lengths "$lengths" --depths "$depths" --trials "$trials" --methods "$methods" \
	--log "$merged" --summarize --threads 1 \
	--json "$out/needle-grid.json" --csv "$out/needle-grid.csv" --report "$out" > "$tmp/table"
cp "$tmp/table" "$out/needle-grid.out"
cat "$tmp/table"
