#!/bin/sh
# Black-box tests of the model runs of hsq-eval (needle, ppl, agree, bench):
# usage errors (exit 2), a tiny needle grid with its table, JSON, CSV and
# report; resuming an interrupted trial log (a half-written last line
# included) gives the summary of an uninterrupted run, and so do the logs
# of a grid split with --only-trials, joined; a log written with
# another configuration is refused (exit 2), a malformed one is an input
# error naming its line (exit 4); tiny ppl, agree and bench runs; --jobs 2
# gives the table and the log records of a run without it, and a worker
# stopped by a signal ends the run (exit 1) with its finished trials kept;
# --summarize prints a log's summary without running or touching it, and
# bench/needle-grid-report.sh summarizes rows of one grid, one length to a
# log, as one grid with a row per length; hsq-learned (hsq with the learned
# reader of --calibration) runs beside hsq on the same tokens, with and
# without --jobs, and a log made with another calibration is refused.
#
# The texts are written here, so nothing depends on ../shared. Runs
# standalone too (bash tests/cli/eval_runs.sh): HSQ_BIN defaults to the
# tree's sanitizer build, HSQ_TEST_MODEL to the installed default model.
#
# Time: the sanitizer build runs the model about five times slower, so the
# cases that run the model for more than a moment use the optimised build
# next to it (build/bin, which `make cli` builds too; HSQ_EVAL_RUN
# overrides); usage errors, log validation and the summary of a finished
# log run under ASan and UBSan. About a minute on two cores.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${HSQ_BIN:-}" ]; then
	HSQ_BIN="$root/build/san/bin"
	[ -x "$HSQ_BIN/hsq-eval" ] || HSQ_BIN="$root/build/bin"
fi
HSQ_BIN=$(cd "$HSQ_BIN" && pwd) || exit 1 # the runs below happen in a temporary directory
: "${HSQ_TEST_MODEL:=$HOME/.local/share/hsq/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
case $HSQ_TEST_MODEL in /*) ;; ?*) HSQ_TEST_MODEL="$(pwd)/$HSQ_TEST_MODEL" ;; esac
export HSQ_TEST_MODEL
. "$here/lib.sh"
E="$HSQ_BIN/hsq-eval"
R=${HSQ_EVAL_RUN:-}
if [ -z "$R" ]; then
	R="$E"
	case $HSQ_BIN in */san/bin) [ -x "${HSQ_BIN%/san/bin}/bin/hsq-eval" ] && R="${HSQ_BIN%/san/bin}/bin/hsq-eval" ;; esac
fi
t_start=$(date +%s)

# --- usage errors (exit 2), before any model is loaded
run "$E" needle --haystack h.txt --methods full,zip; expect "unknown method exits 2" 2 "unknown method 'zip'"
run "$E" ppl --methods hsq,,quant a.txt; expect "an empty method exits 2" 2 "empty item"
run "$E" agree --methods hsq,hsq a.txt; expect "a method twice exits 2" 2 "lists 'hsq' twice"
run "$E" needle; expect "needle without --haystack exits 2" 2 "needs --haystack"
run "$E" needle --haystack h.txt --lengths 512,x; expect "a bad --lengths list exits 2" 2 "--lengths expects comma-separated integers"
run "$E" needle --haystack h.txt --depths 50,50; expect "a depth twice exits 2" 2 "--depths lists 50 twice"
run "$E" needle --haystack h.txt --depths 101; expect "a depth above 100 exits 2" 2 "--depths expects"
run "$E" needle --haystack h.txt --keys 0; expect "--keys 0 exits 2" 2 "--keys expects an integer from 1"
run "$E" needle --haystack h.txt extra; expect "an extra argument exits 2" 2 "needle takes no arguments"
run "$E" needle --haystack h.txt --budget lots; expect "a bad --budget exits 2" 2 "--budget expects"
run "$E" needle --haystack h.txt --retrieval-heads some; expect "a bad --retrieval-heads exits 2" 2 "--retrieval-heads expects"
run "$E" needle --haystack h.txt --resume --force; expect "--resume with --force exits 2" 2 "exclude each other"
run "$E" needle --haystack h.txt --summarize --force; expect "--summarize with --force exits 2" 2 "--summarize and --force exclude each other"
run "$E" ppl --summarize --jobs 2 a.txt; expect "--summarize with --jobs exits 2" 2 "--summarize runs no trial; drop --jobs"
run "$E" needle --haystack h.txt --only-trials 3-1; expect "a backwards --only-trials range exits 2" 2 "--only-trials expects .*first <= last"
run "$E" needle --haystack h.txt --only-trials 4-; expect "an open --only-trials range exits 2" 2 "--only-trials expects"
run "$E" needle --haystack h.txt --trials 4 --only-trials 0,4; expect "--only-trials past --trials exits 2" 2 "names trial 4, but --trials 4 has indices 0 to 3"
run "$E" ppl; expect "ppl without files exits 2" 2 "at least one document"
run "$E" agree --generate 0 a.txt; expect "--generate 0 exits 2" 2 "--generate expects"
run "$E" bench; expect "bench without --text exits 2" 2 "needs --text"
run "$E" bench --text t.txt --json x --csv x; expect "--json and --csv on one file exit 2" 2 "same file"
run "$E" bench --text t.txt --jobs 2; expect "bench has no --jobs (exit 2)" 2 "jobs"
run "$E" needle --haystack h.txt --jobs 0; expect "--jobs 0 exits 2" 2 "--jobs"
run "$E" ppl --methods hsq,hsq-learned a.txt
expect "hsq-learned without --calibration exits 2" 2 "lists hsq-learned, which needs a calibration: pass --calibration FILE"
run "$E" ppl --calibration c.hsqc a.txt
expect "--calibration without hsq-learned exits 2" 2 "--calibration is read by the method hsq-learned alone: add it to --methods"
run "$E" ppl --methods hsq-learned --calibration '' a.txt; expect "an empty --calibration exits 2" 2 "--calibration needs a non-empty path"
for s in needle ppl agree bench; do
	run "$E" $s --help; expect "$s --help exits 0" 0 ""
	expect_out "$s --help shows its usage line" "^usage: hsq-eval $s \[options\]"
	for o in --methods --calibration --budget --retrieval-heads --json --csv --report --log --resume --force --summarize --quiet --model --threads; do
		printf '%s' "$out" | grep -q -- "$o" || fail "$s --help does not list $o"
	done
	[ $s = bench ] || printf '%s' "$out" | grep -q -- --jobs || fail "$s --help does not list --jobs"
done

if ! have_model; then
	finish
fi
M="$HSQ_TEST_MODEL"
have_py=0
command -v python3 >/dev/null 2>&1 && have_py=1
cd "$TMP" || exit 1
# the runs' temporary snapshots go here, to check that they are removed
mkdir -p "$TMP/tmp" && TMPDIR="$TMP/tmp" && export TMPDIR

# Texts: a haystack of town records, and two documents (each more than
# 320 tokens), made here so that the test stands alone.
awk 'BEGIN { for (i = 0; i < 40; i++) printf "In the year %d the harbour of Varn counted %d boats, and the keeper noted %d storms in the log book. ", 1700 + i, 3 * i + 11, i % 7 + 2 }' >hay.txt
awk 'BEGIN { for (i = 0; i < 30; i++) printf "The ferry to Holt left at %d o clock on day %d, carrying %d passengers and letters for the mill. ", 5 + i % 4, i + 1, 20 + 2 * i }' >doc1.txt
awk 'BEGIN { for (i = 0; i < 30; i++) printf "Chapter %d tells how the lamp was trimmed %d times while the wind turned %s. ", i + 1, i % 5 + 2, (i % 2 ? "north" : "west") }' >doc2.txt
echo "Too short." >short.txt

# --- a usage error that needs the model: a length beyond its context
run "$E" needle -m "$M" --haystack hay.txt --lengths 100000 --log x.jsonl
expect "a length beyond the model's context exits 2" 2 "exceeds the model's context"
[ ! -e x.jsonl ] && ok "no log written for a refused run" || fail "a refused run wrote its log"

# --- a tiny needle grid, end to end
NEEDLE="needle -m $M -t 2 --haystack hay.txt --lengths 512 --depths 50 --trials 2 --methods full,hsq"
run "$R" $NEEDLE --log a.jsonl --json a.json --csv a.csv --report rep
expect "a tiny needle run exits 0" 0 ""
cp "$TMP/out" a.out
expect_out "the table has full's cell" "^ +512 +50 full +[0-2]/2 "
expect_out "the table has hsq's cell with McNemar and TOST" "^ +512 +50 hsq +[0-2]/2 .* (yes|no)\$"
expect_out "the table has pooled rows" "^ +all +all hsq "
expect_out "the table shows each method's fast tier" "^ +512: +full [0-9.]+ MiB +hsq [0-9.]+ MiB \(0\.[0-9]+x\)"
expect_out "the table has hsq's answer log-probability and its paired difference" \
	"^ +512 +50 hsq +2 +-[0-9.]+ +[-+][0-9.]+ \[[-+][0-9.]+, [-+][0-9.]+\]\$"
printf '%s' "$err" | grep -q "trial 2/2" && ok "progress goes to stderr" || fail "no progress on stderr" "$err"
[ "$(wc -l <a.jsonl)" -eq 3 ] && ok "the log has the header and two trials" || fail "log lines: $(wc -l <a.jsonl)"
head -n 1 a.csv | grep -q '^length,depth,method,trials,successes,rate,wilson_low,wilson_high,' &&
	ok "csv header" || fail "csv header" "$(head -n 1 a.csv)"
[ "$(wc -l <a.csv)" -eq 5 ] && ok "csv: a row per cell and method, and pooled" || fail "csv lines: $(wc -l <a.csv)"
for f in rep/report.md rep/needle-full.svg rep/needle-hsq.svg; do
	[ -s "$f" ] && ok "$f written" || fail "$f missing or empty"
done
if [ "$have_py" -eq 1 ]; then
	run python3 -m json.tool a.json; expect "the JSON summary parses (json.tool)" 0 ""
	run python3 -c '
import json, sys, xml.etree.ElementTree as ET
doc = json.load(open("a.json"))
assert doc["subcommand"] == "needle" and doc["config"]["lengths"] == [512]
assert doc["config"]["budget"] == "default" and doc["config"]["retrieval_heads"] == "default"
assert [c["method"] for c in doc["pooled"]] == ["full", "hsq"]
assert doc["pooled"][1]["trials"] == 2 and "mcnemar_p" in doc["pooled"][1]["vs_full"]
full, hsq = doc["pooled"]
assert full["logp_trials"] == 2 and hsq["logp_trials"] == 2 and full["logp_mean"] < 0
trials = [json.loads(line) for line in open("a.jsonl")][1:]
lp = [[t["methods"][m]["logp"] for t in trials] for m in ("full", "hsq")]
assert all(v <= 0 for v in lp[0] + lp[1]), lp
diff = sum(h - f for f, h in zip(*lp)) / 2
assert abs(hsq["vs_full"]["logp_diff"] - diff) < 1e-4, (hsq["vs_full"], diff)
lo, hi = hsq["vs_full"]["logp_diff_ci95"]
assert lo <= diff + 1e-4 and diff - 1e-4 <= hi, (lo, hi, diff)
for f in ("rep/needle-full.svg", "rep/needle-hsq.svg"):
    assert ET.parse(f).getroot().tag.endswith("svg")
'
	expect "JSON, log lines and SVG parse and agree" 0 ""
fi

# --- the multi-key variant: three needles, the first asked; an answer counts
# only with the asked city's number
run "$R" $NEEDLE --keys 3 --only-trials 0 --log mk.jsonl -q
expect "a three-key needle run exits 0" 0 ""
if [ "$have_py" -eq 1 ]; then
	run python3 -c '
import json
lines = [json.loads(line) for line in open("mk.jsonl")]
assert lines[0]["config"]["keys"] == 3
(t,) = lines[1:]
keys = t["keys"]
assert len(keys) == 3, keys
assert len({k["city"] for k in keys}) == 3 and len({k["number"] for k in keys}) == 3, keys
assert [k["depth"] for k in keys] == [50, 83, 16], keys  # the asked one at the cell depth, the others spread
for m, r in t["methods"].items():
    assert r["ok"] == (str(keys[0]["number"]) in r["answer"]), (m, r, keys[0])
'
	expect "three distinct needles, the asked one at the depth, success on its number alone" 0 ""
fi

# --- an existing log is neither overwritten nor continued unless asked
run "$E" $NEEDLE --log a.jsonl
expect "an existing log without --resume exits 2" 2 "exists .*--resume.*--force"

# --- resume after an interruption: the header, one trial and half a line
head -n 2 a.jsonl >b.jsonl
sed -n 3p a.jsonl | head -c 60 >>b.jsonl
run "$R" $NEEDLE --log b.jsonl --resume --csv b.csv --json b.json
expect "a resumed run exits 0" 0 "dropping a half-written last line"
printf '%s' "$err" | grep -q "trial 1/2" && fail "the resumed run redid a logged trial" || ok "the resumed run skips the logged trial"
[ "$out" = "$(cat a.out)" ] && ok "resumed table equals the uninterrupted one" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"
cmp -s a.csv b.csv && ok "resumed csv equals the uninterrupted one" || fail "csv differs"
cmp -s a.json b.json && ok "resumed json equals the uninterrupted one" || fail "json differs"
[ "$(wc -l <b.jsonl)" -eq 3 ] && ok "the half line was cut, the trial appended" || fail "resumed log: $(wc -l <b.jsonl) lines"

# --- a finished log: --resume runs nothing, and the summary is the same (under ASan)
run "$E" $NEEDLE --log a.jsonl --resume --csv c.csv -q
expect "resuming a finished log exits 0" 0 ""
[ -z "$err" ] && ok "nothing run, nothing said with -q" || fail "stderr: $err"
cmp -s a.csv c.csv && ok "the finished log gives the same summary" || fail "csv differs"

# --- a run grows: one trial per cell, then --trials 2 --resume keeps it and adds the second
run "$R" $NEEDLE --trials 1 --log g.jsonl -q
expect "a one-trial run exits 0" 0 ""
run "$R" $NEEDLE --log g.jsonl --resume --csv g.csv
expect "--resume with more --trials grows the log" 0 "growing g.jsonl from 1 to 2 trials per cell"
printf '%s' "$err" | grep -q "trial 1/2" && fail "the grown run redid the logged trial" || ok "the grown run skips the logged trial"
[ "$out" = "$(cat a.out)" ] && ok "the grown table equals a two-trial run's" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"
cmp -s a.jsonl g.jsonl && ok "the grown log equals a two-trial run's, byte for byte" || fail "logs differ"
ls | grep -q "^g\.jsonl\." && fail "a temporary file of g.jsonl left behind" "$(ls)" || ok "no temporary file left"
run "$E" $NEEDLE --trials 1 --log a.jsonl --resume
expect "--resume with fewer --trials exits 2" 2 "another configuration \(trials is 1 here but 2 in the log\)"

# --- --only-trials splits a grid: each part runs its trials, the parts' logs concatenate into
# the whole run's (same header), and --resume on the joined log summarizes it without running
run "$R" $NEEDLE --only-trials 1 --log s1.jsonl
expect "an --only-trials run exits 0" 0 ""
printf '%s' "$err" | grep -q "trial 1/2" && fail "--only-trials 1 ran trial 0" || ok "--only-trials 1 skips trial 0"
printf '%s' "$out" | grep -q "^the log holds 1 of the grid's 2 trials" && ok "a partial table says how much of the grid it covers" ||
	fail "no partial-grid line" "$out"
run "$R" $NEEDLE --only-trials 0-0 --log s0.jsonl -q
expect "the other part runs" 0 ""
[ "$(head -n 1 s0.jsonl)" = "$(head -n 1 s1.jsonl)" ] && ok "the parts' logs have the same header" || fail "headers differ"
{ cat s0.jsonl; tail -n +2 s1.jsonl; } >s.jsonl
cmp -s a.jsonl s.jsonl && ok "the joined parts equal the whole run's log, byte for byte" || fail "joined log differs"
run "$E" $NEEDLE --log s.jsonl --resume -q
expect "the joined log resumes" 0 ""
[ "$out" = "$(cat a.out)" ] && ok "the joined log's table equals the whole run's" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"

# --- --summarize reads the log and runs nothing; the file is left as it is
run "$E" $NEEDLE --log a.jsonl --summarize --csv sm.csv -q
expect "--summarize on a finished log exits 0" 0 ""
[ "$out" = "$(cat a.out)" ] && ok "--summarize prints the run's table" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"
cmp -s a.csv sm.csv && ok "--summarize writes the run's csv" || fail "csv differs"
{ head -n 2 a.jsonl; sed -n 3p a.jsonl | head -c 60; } >h.jsonl
cp h.jsonl h0.jsonl
run "$E" $NEEDLE --log h.jsonl --summarize
expect "--summarize on an interrupted log exits 0" 0 "dropping a half-written last line"
printf '%s' "$err" | grep -q "trial [12]/2" && fail "--summarize ran a trial" "$err" || ok "--summarize runs no trial"
expect_out "--summarize says how much of the grid the log holds" "^the log holds 1 of the grid's 2 trials"
cmp -s h.jsonl h0.jsonl && ok "--summarize leaves the log as it was, half line and all" || fail "the log changed"
cp a.jsonl a0.jsonl
run "$E" $NEEDLE --trials 4 --log a.jsonl --summarize -q
expect "--summarize with more --trials than the log's exits 0" 0 ""
expect_out "and summarizes the trials the log holds" "^the log holds 2 of the grid's 4 trials"
cmp -s a.jsonl a0.jsonl && ok "the log is not grown by --summarize" || fail "a.jsonl changed"
run "$E" $NEEDLE --log none.jsonl --summarize
expect "--summarize without a log exits 4" 4 "--summarize: cannot read the trial log none.jsonl"
[ ! -e none.jsonl ] && ok "--summarize makes no log" || fail "none.jsonl was made"
head -n 1 a.jsonl >e.jsonl
run "$E" $NEEDLE --log e.jsonl --summarize
expect "--summarize on a log without trials exits 4" 4 "e.jsonl holds no trial yet"
run "$E" $NEEDLE --seed 2 --log a.jsonl --summarize
expect "--summarize with another configuration exits 2" 2 "--summarize: a.jsonl was written with another configuration \(seed is 2"
printf '%s' "$err" | grep -q -- --force && fail "--summarize suggests --force" "$err" || ok "and does not suggest --force"
# a log whose trials ran under another identity of the model file (an
# older build hashed less of it): summarized, naming the log's identity;
# --resume still refuses it
sed '1s/"model_sha256":"[0-9a-f]*"/"model_sha256":"'"$(printf '%064d' 7)"'"/' a.jsonl >id.jsonl
run "$E" $NEEDLE --log id.jsonl --summarize --json id.json -q
expect "--summarize of a log of another model identity exits 0" 0 ""
[ "$out" = "$(cat a.out)" ] && ok "and prints the run's table" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"
grep -q "\"model_sha256\":\"$(printf '%064d' 7)\"" id.json && ok "its JSON names the log's model identity" ||
	fail "the JSON does not name the log's identity" "$(grep -o '"model_sha256":"[^"]*"' id.json)"
run "$E" $NEEDLE --log id.jsonl --resume
expect "--resume of a log of another model identity exits 2" 2 "another configuration \(model_sha256"

# --- rows of one grid run apart (one length each) summarized as one grid by
# bench/needle-grid-report.sh: a row per length pooled over its depths
run "$R" $NEEDLE --lengths 640 --only-trials 0 --log l640.jsonl -q
expect "a 640-token row with one trial exits 0" 0 ""
sed '1s/"seed":1,"answer/"seed":2,"answer/' l640.jsonl >x640.jsonl
GRID="$root/bench/needle-grid-report.sh"
run env HSQ_EVAL="$E" HSQ_MODEL="$M" HSQ_NEEDLE_HAYSTACK=hay.txt HSQ_NEEDLE_LOGS="a.jsonl x640.jsonl" sh "$GRID" gx
expect "needle-grid-report.sh refuses rows of other configurations" 1 "x640.jsonl was run with another configuration"
run env HSQ_EVAL="$E" HSQ_MODEL="$M" HSQ_NEEDLE_HAYSTACK=hay.txt HSQ_NEEDLE_LOGS="a.jsonl l640.jsonl" sh "$GRID" grid
expect "needle-grid-report.sh summarizes the rows as one grid" 0 ""
expect_out "the grid's table has both lengths' cells" "^ +640 +50 hsq +[0-1]/1 "
expect_out "and says it holds 3 of its 4 trials" "^the log holds 3 of the grid's 4 trials"
row512=$(printf '%s\n' "$out" | grep -E "^ +512 +all hsq " | sed -E 's/^ +512 +all//')
pool512=$(grep -E "^ +all +all hsq " a.out | sed -E 's/^ +all +all//')
[ -n "$row512" ] && [ "$row512" = "$pool512" ] && ok "the 512 rows pooled over depths are the 512 run's pooled rows" ||
	fail "512 rows differ" "grid: $row512 / run: $pool512"
expect_out "the pooled row covers both lengths" "^ +all +all hsq +[0-3]/3 "
[ -s grid/needle-grid.out ] && [ -s grid/needle-grid.csv ] && [ -s grid/report.md ] && [ -s grid/needle-hsq.svg ] &&
	ok "the grid's table, csv, report and heatmaps are written" || fail "grid outputs missing" "$(ls grid)"
grep -q "^| 640 | hsq | " grid/report.md && ok "the report has a table per length" || fail "no per-length rows in the report"
grep -q '^640,all,hsq,' grid/needle-grid.csv && ok "the csv has the per-length rows" || fail "no per-length csv rows"
if [ "$have_py" -eq 1 ]; then
	run python3 -c '
import json
doc = json.load(open("grid/needle-grid.json"))
assert doc["config"]["lengths"] == [512, 640], doc["config"]["lengths"]
rows = [(r["length"], r["method"], r["trials"]) for r in doc["per_length"]]
assert rows == [(512, "full", 2), (512, "hsq", 2), (640, "full", 1), (640, "hsq", 1)], rows
assert [r["trials"] for r in doc["pooled"]] == [3, 3]
'
	expect "the grid's JSON has the per-length rows" 0 ""
fi

# --- --jobs 2: two worker processes share the trials; the table is the one-process run's,
# the log holds the same records (in the order the workers finished them)
run "$R" $NEEDLE --jobs 2 -t 1 --log j.jsonl --csv j.csv
expect "a --jobs 2 needle run exits 0" 0 ""
[ "$out" = "$(cat a.out)" ] && ok "--jobs 2 prints the one-process table" || fail "tables differ" "$(printf '%s\n' "$out" | diff - a.out)"
cmp -s a.csv j.csv && ok "--jobs 2 writes the one-process csv" || fail "csv differs"
[ "$(head -n 1 j.jsonl)" = "$(head -n 1 a.jsonl)" ] && [ "$(tail -n +2 j.jsonl | sort)" = "$(tail -n +2 a.jsonl | sort)" ] &&
	ok "--jobs 2 logs the one-process records" || fail "logs differ"
printf '%s' "$err" | grep -q "job 1/2: length 512" && printf '%s' "$err" | grep -q "job 2/2: length 512" &&
	ok "each worker's progress lines name it" || fail "no job tags on stderr" "$err"

# --- a worker stopped by a signal stops the other and ends the run; --resume finishes it
"$R" $NEEDLE --jobs 2 -t 1 --log k.jsonl >k.out 2>k.err &
pid=$!
kids=""
for i in $(seq 1 200); do
	kids=$(grep -l "^PPid:[[:space:]]*$pid\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3)
	[ "$(printf '%s\n' $kids | grep -c .)" -ge 2 ] && break
	sleep 0.05
done
sleep 1 # past the fork: the worker's clean-up is its own
kill -TERM $(printf '%s\n' $kids | head -n 1) 2>/dev/null
wait $pid
rc=$?
[ "$rc" -eq 1 ] && ok "a killed worker ends the run with exit 1" || fail "exit $rc after a killed worker" "$(cat k.err)"
grep -q "job [12] of 2 was killed by signal 15; the trials finished are kept in k.jsonl: rerun with --resume" k.err &&
	ok "the message names the job, the signal and the log" || fail "message" "$(cat k.err)"
run "$R" $NEEDLE --jobs 2 -t 1 --log k.jsonl --resume -q
expect "the stopped run resumes" 0 ""
[ "$out" = "$(cat a.out)" ] && ok "the resumed --jobs run prints the one-process table" || fail "tables differ"
[ "$(tail -n +2 k.jsonl | sort)" = "$(tail -n +2 a.jsonl | sort)" ] && ok "and its log holds the same records" ||
	fail "logs differ"

# --- a signal while a snapshot is being saved: the library's temporary file
# (".doc.hsq.XXXXXXXX.tmp") is in the run's directory, which must still go
mkdir -p "$TMPDIR/sig"
TMPDIR="$TMPDIR/sig" "$E" $NEEDLE --log sig.jsonl >/dev/null 2>&1 &
pid=$!
for i in $(seq 1 200); do
	d=$(ls -d "$TMPDIR"/sig/hsq-eval.* 2>/dev/null) && [ -n "$d" ] && break
	sleep 0.05
done
touch "$d/.doc.hsq.0badf00d.tmp" 2>/dev/null
kill -TERM $pid 2>/dev/null
wait $pid
[ -n "$d" ] && [ -z "$(ls -A "$TMPDIR/sig")" ] && ok "SIGTERM removes the run's directory with a stray file in it" ||
	fail "left in TMPDIR/sig: $(ls -A "$TMPDIR/sig")"
rmdir "$TMPDIR/sig"

# --- a log written before the answer was scored (no "logp"): read, no log-probability table
sed 's/"logp":[^,]*,//g' a.jsonl >o.jsonl
run "$E" $NEEDLE --log o.jsonl --resume --csv o.csv -q
expect "a log without logp resumes" 0 ""
printf '%s' "$out" | grep -q "log-probability" && fail "a log-probability table from a log without any" ||
	ok "no log-probability table without logp"
sed -n 2p o.csv | grep -q ',0,,,,$' && ok "csv: 0 scored trials, empty log-probability fields" ||
	fail "csv row" "$(sed -n 2p o.csv)"
sed '3s/"logp":[^,]*,/"logp":0.5,/' a.jsonl >q.jsonl
run "$E" $NEEDLE --log q.jsonl --resume
expect "a positive logp exits 4" 4 "q.jsonl:3: .*'logp' is not a log-probability .*method full"

# --- resume with another configuration, or from another subcommand's log
run "$E" $NEEDLE --seed 2 --log a.jsonl --resume
expect "--resume with another configuration exits 2" 2 "another configuration \(seed is 2 here but 1 in the log\)"
run "$E" $NEEDLE --retrieval-heads 0 --log a.jsonl --resume
expect "--resume with other retrieval heads exits 2" 2 "another configuration \(retrieval_heads"
cp a.jsonl p.jsonl
run "$E" ppl -m "$M" --context 256 --continuation 64 --log p.jsonl --resume doc1.txt doc2.txt
expect "--resume on another subcommand's log exits 2" 2 "is the log of 'hsq-eval needle'"

# --- malformed logs: exit 4 naming the file and line
{ head -n 1 a.jsonl; echo '{"record":"trial","length":512'; sed -n 3p a.jsonl; } >bad1.jsonl
run "$E" $NEEDLE --log bad1.jsonl --resume
expect "a broken line in the middle exits 4 naming it" 4 "bad1.jsonl:2: bad record: .*byte"
{ head -n 2 a.jsonl; sed -n 3p a.jsonl | sed 's/"trial":1/"trial":7/'; } >bad2.jsonl
run "$E" $NEEDLE --log bad2.jsonl --resume
expect "a trial outside the grid exits 4" 4 "bad2.jsonl:3: bad record: 'trial' is 7"
{ head -n 2 a.jsonl; sed -n 2p a.jsonl; } >bad3.jsonl
run "$E" $NEEDLE --log bad3.jsonl --resume
expect "a trial logged twice exits 4" 4 "bad3.jsonl:3: trial 0 .* twice"
{ head -n 1 a.jsonl; sed -n 2p a.jsonl | sed 's/"ok":true/"ok":1/; s/"ok":false/"ok":0/'; } >bad4.jsonl
run "$E" $NEEDLE --log bad4.jsonl --resume
expect "a mistyped field exits 4" 4 "bad4.jsonl:2: bad record: 'ok' is not true or false"
printf 'not json\n' >bad5.jsonl
run "$E" $NEEDLE --log bad5.jsonl --resume
expect "a file that is not a log exits 4" 4 "bad5.jsonl:1: not a trial log header"

# --- ppl: two documents and a short one (skipped)
run "$R" ppl -m "$M" -t 2 --context 256 --continuation 64 --methods full,hsq,streaming --log p1.jsonl \
	--json p.json --csv p.csv --report prep doc1.txt doc2.txt short.txt
expect "a tiny ppl run exits 0" 0 "skipping short.txt"
cp "$TMP/out" p1.out
expect_out "ppl shows each document" "^doc2.txt +[0-9.]+ +[0-9.]+ \(1?[0-9]\.[0-9]+x\)"
expect_out "ppl summarizes hsq with a bootstrap interval and a verdict" "^hsq +2 +128 +[0-9.]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\] +[0-9.]+ +[0-9.]+ +(yes|no) "
[ -s prep/report.md ] && [ -s prep/ppl-ratio.svg ] && ok "ppl report written" || fail "ppl report missing"
if [ "$have_py" -eq 1 ]; then
	run python3 -c '
import csv, json
doc = json.load(open("p.json"))
rows = {r["method"]: r for r in csv.DictReader(open("p.csv"))}
assert [m["method"] for m in doc["methods"]] == ["full", "hsq", "streaming"]
assert len(doc["documents"]) == 2
h = rows["hsq"]
assert float(h["boot_low"]) <= float(h["ratio"]) * 1.000001 and float(h["ratio"]) <= float(h["boot_high"]) * 1.000001
assert abs(float(h["ratio"]) - float(h["ppl"]) / float(rows["full"]["ppl"])) < 1e-4
'
	expect "ppl JSON and CSV parse and agree" 0 ""
fi

run "$R" ppl -m "$M" -t 1 --jobs 2 --context 256 --continuation 64 --methods full,hsq,streaming --log pj.jsonl \
	doc1.txt doc2.txt short.txt
expect "a ppl run with --jobs 2 exits 0" 0 ""
[ "$out" = "$(cat p1.out)" ] && ok "ppl --jobs 2 prints the one-process table" || fail "ppl tables differ" "$(printf '%s\n' "$out" | diff - p1.out)"

# --- hsq-learned: a tiny calibration made here, then hsq and hsq-learned paired
# on the same tokens (under ASan: the hidden rows of the prefill are kept in
# the runner and handed to each hsq-learned context)
CAL="$HSQ_BIN/hsq-calibrate"
case $HSQ_BIN in */san/bin) [ -x "${HSQ_BIN%/san/bin}/bin/hsq-calibrate" ] && CAL="${HSQ_BIN%/san/bin}/bin/hsq-calibrate" ;; esac
for i in 1 2 3 4; do cat "$root/share/sample-document.txt"; done >cal.txt
CALIBRATE="-m $M --context 256 --continuation 16 --max-docs 4 --holdout 0.25 --epochs 2 --hidden 8 -q"
run "$CAL" $CALIBRATE -o "$TMP/c.hsqc" cal.txt; expect "hsq-calibrate makes a tiny calibration" 0 ""
run "$CAL" $CALIBRATE --seed 2 -o "$TMP/c2.hsqc" cal.txt; expect "and another, of another seed" 0 ""
LEARNED="ppl -m $M -t 2 --context 256 --continuation 16 --methods hsq,hsq-learned doc1.txt doc2.txt"
run "$E" $LEARNED --calibration "$TMP/c.hsqc" --log pl.jsonl --json pl.json
expect "a ppl run with hsq-learned exits 0" 0 ""
cp "$TMP/out" pl.out
expect_out "ppl has a row for hsq-learned" "^hsq-learned +2 +32 +[0-9.]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\] "
expect_out "the method column fits hsq-learned" "^method       docs "
expect_out "ppl reports the router's recall of hsq-learned against hsq" "^hsq-learned +[01]\.[0-9]{4} +[0-9]+ +[01]\.[0-9]{4}  [+-][01]\.[0-9]{4} \["
if [ "$have_py" -eq 1 ]; then
	run python3 -c '
import hashlib, json, sys
doc = json.load(open("pl.json"))
assert [m["method"] for m in doc["methods"]] == ["full", "hsq", "hsq-learned"], doc["methods"]
rec = doc["methods"][2]["recall"]
assert 0 < rec["mean"] <= 1.001 and 0 <= rec["worst_layer"] < 30 and len(rec["diff_vs_hsq_bootstrap95"]) == 2, rec
assert "recall" not in doc["methods"][0], doc["methods"][0]
for line in open("pl.jsonl").readlines()[1:]:
    r = json.loads(line)["methods"]
    assert len(r["hsq"]["recall"]) == 30 and "recall" not in r["full"], r
head = json.loads(open("pl.jsonl").readline())["config"]
assert head["methods"] == ["full", "hsq", "hsq-learned"], head
assert head["calibration_sha256"] == hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), head
for line in open("pl.jsonl").readlines()[1:]:
    assert "hsq-learned" in json.loads(line)["methods"], line
' "$TMP/c.hsqc"
	expect "hsq-learned in the JSON with its recall, the calibration's SHA-256 in the log" 0 ""
fi
run "$E" $LEARNED --jobs 2 -t 1 --calibration "$TMP/c.hsqc" --log plj.jsonl -q
expect "hsq-learned with --jobs 2 exits 0" 0 ""
[ "$out" = "$(cat pl.out)" ] && ok "hsq-learned --jobs 2 prints the one-process table" ||
	fail "tables differ" "$(printf '%s\n' "$out" | diff - pl.out)"
run "$E" $LEARNED --calibration "$TMP/c2.hsqc" --log pl.jsonl --resume
expect "--resume with another calibration exits 2" 2 "another configuration \(calibration_sha256 is \"[0-9a-f]{64}\" here"
run "$E" $LEARNED --calibration "$TMP/c.hsqc" --log pl.jsonl --resume -q
expect "--resume with the same calibration exits 0" 0 ""
[ "$out" = "$(cat pl.out)" ] && ok "and prints the run's table" || fail "tables differ" "$(printf '%s\n' "$out" | diff - pl.out)"
run "$E" ppl -m "$M" --methods hsq-learned --calibration doc1.txt --log px.jsonl doc1.txt
expect "a file that is not a calibration exits 3" 3 "--calibration: .*doc1.txt: not an hsq calibration file"

# --- agree
run "$R" agree -m "$M" -t 2 --context 256 --generate 16 --methods full,hsq,snapkv --log a1.jsonl --csv ag.csv \
	--json ag.json doc1.txt doc2.txt
expect "a tiny agree run exits 0" 0 ""
expect_out "agree summarizes hsq" "^hsq +2 +32 +[01]\.[0-9]+ +[01]\.[0-9]+ \[[0-9.]+, [0-9.]+\] +([0-9]+|none) "
if [ "$have_py" -eq 1 ]; then
	run python3 -c '
import json
doc = json.load(open("ag.json"))
assert [m["method"] for m in doc["methods"]] == ["full", "hsq", "snapkv"]
assert doc["methods"][0]["mean"] == 1
'
	expect "agree JSON parses" 0 ""
fi

# --- bench: every method, one length
run "$R" bench -m "$M" -t 2 --lengths 512 --decode 8 --text hay.txt --log b1.jsonl --csv bn.csv --json bn.json --report brep
expect "a tiny bench run exits 0" 0 ""
for m in full quant hsq streaming snapkv; do
	printf '%s' "$out" | grep -Eq "^ +512 $m " && ok "bench has a row for $m" || fail "bench has no row for $m"
done
expect_out "bench gives full's ratios as 1" "^ +512 full .*\( 1\.00x\)"
[ -s brep/bench-decode.svg ] && ok "bench plot written" || fail "bench plot missing"
[ "$(wc -l <bn.csv)" -eq 6 ] && ok "bench csv: a row per method" || fail "bench csv lines: $(wc -l <bn.csv)"
run "$E" bench -m "$M" -t 2 --lengths 512 --decode 8 --text hay.txt --log b1.jsonl --summarize -q
expect "bench --summarize exits 0" 0 ""
expect_out "bench --summarize prints the logged rows" "^ +512 hsq "
grep -q '"first_step_s":' b1.jsonl && ok "bench logs the first step's time" || fail "bench log has no first_step_s"
run "$E" bench --text hay.txt --repeat 0; expect "bench --repeat 0 exits 2" 2 "--repeat"
run "$R" bench -m "$M" -t 2 --lengths 512 --decode 4 --repeat 2 --methods full,hsq --text hay.txt --log b3.jsonl
expect "bench --repeat 2 exits 0" 0 ""
expect_out "bench --repeat 2 says its rounds" "best of 2 rounds"
grep -q '"repeat":2' b3.jsonl && ok "bench log keeps --repeat" || fail "bench log has no repeat"
sed '1s/"lengths":\[512\]/"lengths":[512,640]/' b1.jsonl >b2.jsonl
run "$E" bench -m "$M" -t 2 --lengths 512,640 --decode 8 --text hay.txt --log b2.jsonl --summarize
expect "bench --summarize with a length not in the log exits 4" 4 "length 640 is not in b2.jsonl; run it first"
[ -z "$(ls -A "$TMPDIR")" ] && ok "temporary snapshots removed" || fail "left in TMPDIR: $(ls -A "$TMPDIR")"

echo "eval_runs: $(($(date +%s) - t_start)) s"
finish
