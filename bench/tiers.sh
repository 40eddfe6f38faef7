#!/bin/sh
# bench/tiers.sh BIN MODEL CTX N_DOCS - runs bench/tiers_quality on State of
# the Union addresses from 1951 on that are at least 40 KB (so CTX + 512
# tokens fit), in chronological order, 2 threads. Prints the per-document
# lines and the summary (ratios to full from the same run).
set -eu
bin=$1 model=$2 ctx=$3 n=$4
dir=${HSQ_CORPORA:-../shared/corpora}/sotu
if [ ! -d "$dir" ]; then
	echo "SKIP: bench-tiers: $dir is absent (the evaluation corpus lives in ../shared)"
	exit 0
fi
docs=$(for f in "$dir"/*.txt; do
	y=$(basename "$f" | cut -c1-4)
	[ "$y" -ge 1951 ] && [ "$(wc -c < "$f")" -ge 40000 ] && echo "$f"
done | head -n "$n")
exec "$bin" "$model" 2 "$ctx" 512 128 $docs
