#!/bin/sh
# calibrate.sh BINDIR MODEL [GEMMA] - the calibrations the project ships
# (make calibrate): hsq-calibrate for each model on the calibration texts
# of ../shared/corpora (the State of the Union addresses of 1901 to 1950,
# the King James Bible and Moby-Dick; no evaluation reads them), default
# options and seed, into share/calibrations/MODEL.hsqc, with the training
# record beside it (MODEL.json). The files do not depend on the machine or
# the thread count: a rerun on the same texts gives the same bytes.
set -eu
[ $# -ge 2 ] || { echo "usage: scripts/calibrate.sh BINDIR MODEL [GEMMA]" >&2; exit 2; }
bin=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
corp=$here/../shared/corpora
if ! ls "$corp"/sotu/19[1-4][0-9]_*.txt > /dev/null 2>&1 || [ ! -f "$corp/kjv.txt" ] || [ ! -f "$corp/moby-dick.txt" ]; then
	echo "SKIP: calibrate.sh: the calibration texts in ../shared/corpora/ are absent"
	exit 0
fi
out=$here/share/calibrations
mkdir -p "$out"
for m in "$@"; do
	[ -n "$m" ] || continue
	if [ ! -f "$m" ]; then
		echo "SKIP: calibrate.sh: $m is absent (make model / make gemma)"
		continue
	fi
	name=$(basename "$m" .gguf)
	echo "calibrate.sh: $name, $(date -u '+%Y-%m-%d %H:%M:%S') UTC" >&2
	"$bin/hsq-calibrate" -m "$m" -o "$out/$name.hsqc" --json "$out/$name.json" \
		"$corp"/sotu/190[1-9]_*.txt "$corp"/sotu/19[1-4][0-9]_*.txt "$corp"/sotu/1950_*.txt "$corp/kjv.txt" "$corp/moby-dick.txt"
done
