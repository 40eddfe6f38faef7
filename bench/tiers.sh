#!/bin/sh
# bench/tiers.sh BIN MODEL CTX N_SAMPLES [N_GEN [BYTES]] - runs
# bench/tiers_quality (2 threads, 512 scored tokens, N_GEN generated, default
# 256) on samples of the State of the Union addresses from 1951 on: the
# addresses in chronological order are cut into consecutive, non-overlapping
# samples, each one address or several joined (blank line between) until it
# holds at least BYTES (default 48000: enough for CTX + 512 tokens at 8K;
# 160000 for gemma at 32K). The samples are written to
# bench/out/sotu-samples/ (sotu-samples-BYTES/ for another size) and listed
# with their addresses first. HSQ_SOTU_FROM and HSQ_SOTU_UNTIL (years,
# default 1951 and none) pick other addresses, for example 1901 and 1950
# for 7 samples at 32K beside the 13 that 1951 on holds; such samples go
# to a directory named for the years as well.
set -eu
bin=$1 model=$2 ctx=$3 n=$4 gen=${5:-256} bytes=${6:-48000}
dir=${HSQ_CORPORA:-../shared/corpora}/sotu
if [ ! -d "$dir" ]; then
	echo "SKIP: bench-tiers: $dir is absent (the evaluation corpus lives in ../shared)"
	exit 0
fi
from=${HSQ_SOTU_FROM:-1951} until=${HSQ_SOTU_UNTIL:-9999}
out=bench/out/sotu-samples
[ "$bytes" = 48000 ] || out=$out-$bytes
[ "$from" = 1951 ] && [ "$until" = 9999 ] || out=$out-$from-$until
rm -rf "$out"
mkdir -p "$out"
i=0 size=0 members=
for f in "$dir"/*.txt; do
	y=$(basename "$f" | cut -c1-4)
	[ "$y" -ge "$from" ] && [ "$y" -le "$until" ] || continue
	[ "$i" -lt "$n" ] || break
	s=$(printf '%s/sample-%02d.txt' "$out" "$i")
	[ "$size" -gt 0 ] && printf '\n\n' >> "$s"
	cat "$f" >> "$s"
	members="$members $(basename "$f" .txt)"
	size=$(wc -c < "$s")
	if [ "$size" -ge "$bytes" ]; then
		echo "# $(basename "$s"):$members"
		i=$((i + 1)) size=0 members=
	fi
done
[ "$size" -gt 0 ] && rm -f "$s" # an unfinished last sample
exec "$bin" "$model" 2 "$ctx" 512 "$gen" "$out"/sample-*.txt
