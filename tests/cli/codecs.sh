#!/bin/sh
# Black-box tests of `hsq-eval codecs`: usage errors (exit 2), a small
# study end to end, its CSV/JSON/SVG outputs, determinism, write errors.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
E="$HSQ_BIN/hsq-eval"
SMALL="--seeds 3 --regimes isotropic,low-rank --codecs tq,squ --bits 2,4 --dim 64 --tokens 64 --queries 4 --calib 160"

# --- dispatcher
run "$E"; expect "no subcommand is a usage error" 2 "missing subcommand"
run "$E" frobnicate; expect "unknown subcommand exits 2" 2 "unknown subcommand 'frobnicate'"
run "$E" --seeds 3 codecs; expect "options before the subcommand exit 2" 2 "before the subcommand"
run "$E" --help; expect "--help exits 0" 0 ""
expect_out "--help lists codecs" "codecs"
run "$E" --version; expect "--version exits 0" 0 ""
expect_out "--version prints the name and version" "^hsq-eval [0-9]+\.[0-9]+\.[0-9]+$"

# --- codecs usage errors (exit 2, message on stderr prefixed hsq-eval:)
run "$E" codecs --seeds 1; expect "--seeds 1 exits 2" 2 "^hsq-eval: --seeds expects an integer from 2"
run "$E" codecs --seeds x; expect "--seeds x exits 2" 2 "hsq-eval: --seeds"
run "$E" codecs --bits 2,9; expect "--bits 9 exits 2" 2 "--bits expects integers from 1 to 8"
run "$E" codecs --bits 5 --codecs tq; expect "tq at 5 bits exits 2" 2 "tq does not support 5 bits"
run "$E" codecs --codecs tq,zip; expect "unknown codec exits 2" 2 "unknown codec 'zip'"
run "$E" codecs --regimes gaussian; expect "unknown regime exits 2" 2 "unknown regime 'gaussian'"
run "$E" codecs --metric mse; expect "unknown metric exits 2" 2 "unknown metric 'mse'"
run "$E" codecs --streams pcg64,pcg64; expect "the same stream twice exits 2" 2 "different generators"
run "$E" codecs --bogus; expect "unknown option exits 2" 2 "try 'hsq-eval --help'"
run "$E" codecs extra; expect "an extra argument exits 2" 2 "codecs takes no arguments"
run "$E" codecs --tail-bits 4 --max-bits 2; expect "tail floor above the cap exits 2" 2 "exceeds --max-bits"
run "$E" codecs --help; expect "codecs --help exits 0" 0 ""
expect_out "codecs --help shows its usage line" "^usage: hsq-eval codecs \[options\]"
for o in --seeds --regimes --codecs --bits --dim --tokens --queries --calib --score-std --base-seed \
	--streams --gap-ratio --tail-bits --max-bits --joint-calib --metric --threads --output --quiet; do
	printf '%s' "$out" | grep -q -- "$o" && ok "codecs --help lists $o" || fail "codecs --help does not list $o"
done
man_page="$here/../../man/hsq-eval.1"
if [ -f "$man_page" ]; then
	grep -Eq 'hsq(\\)?-eval codecs' "$man_page" && ok "man page documents codecs" || fail "man page lacks codecs"
	for o in $(printf '%s' "$out" | grep -o -- '--[a-z-]*' | sort -u); do
		m=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
		grep -q -- "$m" "$man_page" && ok "man page documents $o" || fail "man page does not document $o"
	done
fi

# --- a small study end to end
run "$E" codecs $SMALL -o "$TMP/a"; expect "a small study exits 0" 0 ""
expect_out "the table has a low-rank squ row" "^low-rank +squ +2 "
expect_out "the table reports KS between streams" "ks p"
expect_out "findings are reported" "^findings \(verdict on both streams, pcg64 and mt19937"
# a finding's verdict appears once: no claim line ends in a second verdict
if printf '%s\n' "$out" | grep -Eq '\((held|did not hold|not evaluable)\)$'; then
	fail "a finding's verdict appears once" "$(printf '%s\n' "$out" | grep -E '\((held|did not hold|not evaluable)\)$' | head -n 2)"
else
	ok "a finding's verdict appears once"
fi
# every finding opens with one verdict; a split names each stream's
words=$(printf '%s\n' "$out" | sed -n '/^findings/,$p' | grep -E '^  [a-z]' | grep -cE '^  (held|did not hold|not evaluable|streams differ) +[a-z0-9-]+: ')
[ "$words" -eq 7 ] && ok "seven findings, each opening with its verdict" || fail "findings opening with a verdict: $words of 7"
if printf '%s\n' "$out" | grep -q '^  streams differ'; then
	printf '%s\n' "$out" | grep -A1 '^  streams differ' | grep -Eq '^ +pcg64: (held|did not hold|not evaluable); mt19937: (held|did not hold|not evaluable)$' &&
		ok "a split verdict names each stream's" || fail "a split verdict does not name each stream's"
fi
for f in a.csv a.json a.svg; do
	[ -s "$TMP/$f" ] && ok "$f written" || fail "$f missing or empty"
done
lines=$(wc -l < "$TMP/a.csv")
# header + 2 regimes x 2 codecs x 2 widths x 10 metrics
[ "$lines" -eq 81 ] && ok "csv has one row per cell and metric" || fail "csv has $lines lines, expected 81"
head -n 1 "$TMP/a.csv" | grep -q '^regime,codec,bits,bits_per_value,metric,pcg64_mean,pcg64_sd,pcg64_ci_lo,pcg64_ci_hi,mt19937_mean' \
	&& ok "csv header" || fail "csv header" "$(head -n 1 "$TMP/a.csv")"
if command -v python3 >/dev/null 2>&1; then
	python3 - "$TMP/a.csv" "$TMP/a.json" "$TMP/a.svg" <<'PY' && ok "csv, json and svg parse and agree" || fail "outputs do not parse or agree"
import csv, json, sys, xml.etree.ElementTree as ET
rows = list(csv.DictReader(open(sys.argv[1])))
doc = json.load(open(sys.argv[2]))
assert doc["subcommand"] == "codecs" and doc["params"]["seeds"] == 3
assert len(doc["cells"]) == 8 and len(doc["findings"]) == 7
for r in rows:
    float(r["pcg64_mean"]); float(r["mt19937_mean"]); float(r["ks_p"])
    assert float(r["pcg64_ci_lo"]) <= float(r["pcg64_mean"]) <= float(r["pcg64_ci_hi"])
cell = [c for c in doc["cells"] if c["regime"] == "low-rank" and c["codec"] == "squ" and c["bits"] == 2][0]
row = [r for r in rows if r["regime"] == "low-rank" and r["codec"] == "squ" and r["bits"] == "2" and r["metric"] == "d2"][0]
assert abs(cell["metrics"]["d2"]["pcg64"]["mean"] - float(row["pcg64_mean"])) <= 1e-6 * abs(float(row["pcg64_mean"]))
root = ET.parse(sys.argv[3]).getroot()
assert root.tag.endswith("svg")
assert len([e for e in root.iter() if e.tag.endswith("polyline")]) == 4
PY
fi

# --- determinism: same parameters, same numbers, whatever the thread count
run "$E" codecs $SMALL -q --threads 1 -o "$TMP/b"; expect "-q run exits 0" 0 ""
[ -z "$out" ] && ok "-q prints nothing" || fail "-q printed output" "$out"
cmp -s "$TMP/a.csv" "$TMP/b.csv" && ok "csv identical with 1 thread" || fail "csv differs across thread counts"
cmp -s "$TMP/a.svg" "$TMP/b.svg" && ok "svg identical with 1 thread" || fail "svg differs across thread counts"
# -t is --threads, as in every subcommand (--jobs would be processes); -j is no option
run "$E" codecs $SMALL -q -t 2 -o "$TMP/t"; expect "-t 2 exits 0" 0 ""
cmp -s "$TMP/a.csv" "$TMP/t.csv" && ok "csv identical with -t 2" || fail "csv differs with -t 2"
run "$E" codecs $SMALL -q -j 1 -o "$TMP/j"; expect "-j is unknown (exit 2)" 2 "option '-j' is unknown"
run "$E" codecs $SMALL -q --base-seed 2 -o "$TMP/c"; expect "another base seed exits 0" 0 ""
cmp -s "$TMP/a.csv" "$TMP/c.csv" && fail "another base seed gives identical numbers" || ok "another base seed gives other numbers"

# --- one stream: no KS columns filled, still valid
run "$E" codecs $SMALL -q --streams mt19937 -o "$TMP/d"; expect "a single stream exits 0" 0 ""
head -n 1 "$TMP/d.csv" | grep -q '^regime,codec,bits,bits_per_value,metric,mt19937_mean,mt19937_sd,mt19937_ci_lo,mt19937_ci_hi,ks_d,ks_p$' \
	&& ok "single-stream csv header" || fail "single-stream csv header" "$(head -n 1 "$TMP/d.csv")"

# --- a run that fails keeps earlier results and leaves no temporary files
echo "earlier results" > "$TMP/e.csv"
run "$E" codecs --seeds 2 --regimes low-rank --codecs sq --bits 1 --tail-bits 2 --dim 64 --tokens 32 --calib 100 -o "$TMP/e"
expect "a tail floor above the budget fails the run" 2 "tail floor"
grep -q "earlier results" "$TMP/e.csv" && ok "earlier csv untouched" || fail "earlier csv overwritten"
ls "$TMP" | grep -q '^e\.\(csv\|json\|svg\)\.' && fail "temporary files left behind" "$(ls "$TMP")" || ok "no temporary files left"

# --- write errors exit 1 naming the file
run "$E" codecs $SMALL -o "$TMP/no/such/dir/x"; expect "an unwritable prefix exits 1" 1 "cannot write .*x.csv"

finish
