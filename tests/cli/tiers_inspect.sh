#!/bin/sh
# Black-box tests of hsq-inspect on compressed snapshots: the tier report
# (plain, --heads, --json, --verify), router traces of hsq-decode --trace
# (hit rates, top groups with their text, heatmap, --svg), trace errors
# (exit 4 naming the line), --trace on other modes (exit 2), and damaged
# tier sections (exit 5).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
I="$HSQ_BIN/hsq-inspect"
P="$HSQ_BIN/hsq-prefill"
D="$HSQ_BIN/hsq-decode"
doc="$here/../../share/sample-document.txt"
TAB=$(printf '\t')

# --- usage (exit 2), no model needed
run "$I" --top 3 a.hsq; expect "--top without --trace is a usage error" 2 "--top is only used with --trace"
run "$I" --svg x.svg a.hsq; expect "--svg without --trace is a usage error" 2 "--svg is only used with --trace"
run "$I" --trace t.txt --top 0 a.hsq; expect "--top 0 is a usage error" 2 "--top expects an integer"
run "$I" --help; expect "--help exits 0" 0 ""
for o in --heads --trace --top --svg; do
	printf '%s' "$out" | grep -q -- "$o" && ok "--help lists $o" || fail "--help does not list $o"
done

if ! have_model; then
	finish
fi
M="$HSQ_TEST_MODEL"
have_py=0
command -v python3 >/dev/null 2>&1 && have_py=1

# Three paragraphs of the sample document (about 240 tokens) in hsq mode.
awk 'BEGIN { RS = ""; ORS = "\n\n" } NR <= 3' "$doc" > "$TMP/doc.txt"
run "$P" -m "$M" --mode hsq -t 2 -o "$TMP/doc.hsq" -f "$TMP/doc.txt"
if [ "$rc" -ne 0 ]; then
	fail "hsq-prefill --mode hsq could not write a snapshot" "$err"
	finish
fi
S="$TMP/doc.hsq"
run "$D" -m "$M" -s "$S" -t 2 -p " The first keeper was" -n 8 --trace "$TMP/trace.txt"
expect "hsq-decode --trace succeeds" 0 ""
T="$TMP/trace.txt"
n_data=$(grep -vc '^#' "$T")
run "$D" -m "$M" -s "$S" -t 2 -p " The first keeper was" -n 2 --retrieval-heads 2 -v
expect "hsq-decode --retrieval-heads 2 -v says so" 0 "budget 256 tokens per head; 2 retrieval heads fetch every group"
run "$D" -m "$M" -s "$S" -t 2 -p " The first keeper was" -n 2 --retrieval-heads many
expect "a bad --retrieval-heads exits 2" 2 "--retrieval-heads"
run "$D" -m "$M" -s "$S" -t 2 -p " The first keeper was" -n 2 --retrieval-heads 0 -v
expect "unmarked heads keep their residual keys (-v)" 0 "0 retrieval heads fetch every group; 15 heads decode keys with residual codes"
run "$D" -m "$M" -s "$S" -t 2 -p " The first keeper was" -n 2 --no-residual-keys -v
expect "--no-residual-keys turns them off (-v)" 0 "15 retrieval heads fetch every group; 0 heads decode keys with residual codes"

# --- --residual-heads at prefill: every head, none, a bad value
run "$P" -m "$M" --mode hsq -t 2 --residual-heads all -o "$TMP/rall.hsq" -f "$TMP/doc.txt"
expect "hsq-prefill --residual-heads all succeeds" 0 ""
run "$I" "$TMP/rall.hsq"; expect "inspect of --residual-heads all succeeds" 0 ""
expect_out "--residual-heads all gives every head residual keys" "^residual: +90 heads keep a second 4-bit code"
expect_out "...and the same retrieval heads" "the 15 heads hsq-decode fetches in full by default"
run "$P" -m "$M" --mode hsq -t 2 --residual-heads 0 -o "$TMP/rnone.hsq" -f "$TMP/doc.txt"
expect "hsq-prefill --residual-heads 0 succeeds" 0 ""
run "$I" --verify "$TMP/rnone.hsq"; expect "inspect of --residual-heads 0 succeeds" 0 ""
expect_out "--residual-heads 0 gives no head residual keys" "^residual: +none \(every key decodes from its 4-bit code\)\$"
printf '%s' "$out" | grep -q "keys.residual" && fail "--residual-heads 0 still wrote keys.residual" || ok "--residual-heads 0 writes no keys.residual section"
s_all=$(wc -c < "$TMP/rall.hsq"); s_def=$(wc -c < "$S"); s_none=$(wc -c < "$TMP/rnone.hsq")
[ "$s_none" -lt "$s_def" ] && [ "$s_def" -lt "$s_all" ] && ok "snapshot sizes: none $s_none < default $s_def < all $s_all" ||
	fail "snapshot sizes: none $s_none, default $s_def, all $s_all"
run "$P" -m "$M" --mode hsq -t 2 --residual-heads some -o "$TMP/rbad.hsq" -f "$TMP/doc.txt"
expect "a bad --residual-heads exits 2" 2 "--residual-heads"
run "$P" -m "$M" --mode full -t 2 --residual-heads all -o "$TMP/rbad.hsq" -f "$TMP/doc.txt"
expect "--residual-heads with --mode full exits 2" 2 "do not apply to --mode full"

# --- --key-rounding: query by default, nearest on request, same size, a bad value
run "$I" "$S"; expect_out "the default rounds keys for the queries" "^params: .*, key-rounding query\$"
run "$P" -m "$M" --mode hsq -t 2 --key-rounding nearest -o "$TMP/near.hsq" -f "$TMP/doc.txt"
expect "hsq-prefill --key-rounding nearest succeeds" 0 ""
run "$I" --json "$TMP/near.hsq"; expect "inspect --json of --key-rounding nearest succeeds" 0 ""
printf '%s' "$out" | grep -q '"key_rounding":"nearest"' && ok "--json reports key_rounding nearest" ||
	fail "--json does not report key_rounding nearest"
cmp -s "$TMP/near.hsq" "$S" && fail "--key-rounding nearest wrote the same file as query" ||
	ok "--key-rounding nearest writes other key codes"
run "$P" -m "$M" --mode hsq -t 2 --key-rounding round -o "$TMP/rbad.hsq" -f "$TMP/doc.txt"
expect "a bad --key-rounding exits 2" 2 "--key-rounding 'round' is unknown; use query or nearest"
head -n 1 "$T" | grep -q '^# hsq trace 1' && ok "the trace starts with its comment" || fail "trace head: $(head -n 1 "$T")"
bad=$(grep -v '^#' "$T" | grep -Evc "^[0-9]+$TAB[0-9]+$TAB[0-9]+$TAB([0-9]+(,[0-9]+)*|-)\$")
[ "$bad" -eq 0 ] && [ "$n_data" -gt 0 ] && [ $((n_data % 90)) -eq 0 ] &&
	ok "the trace has $n_data well-formed lines (30 layers x 3 heads per step)" || fail "trace: $n_data lines, $bad malformed"

# --- the tier report
run "$I" "$S"; expect "inspect of an hsq snapshot succeeds" 0 ""
[ -z "$err" ] && ok "inspect is quiet on stderr" || fail "stderr: $err"
expect_out "shows the format version" "hsq snapshot 1\.6"
expect_out "shows the mode" "mode: +hsq"
expect_out "shows the reader and compressor" "tiers: +reader obs-attention, compressor obs-weighted"
expect_out "shows the tier parameters" "params: +sinks 4, window 64, l1-fraction 0\.03, group-size 16, medium-fraction 0\.25"
expect_out "shows the L2 groups by class" "L2: +[1-9][0-9]* groups \([0-9]+ low of 16 tokens, [0-9]+ medium of 8\)"
expect_out "shows the L3 archive" "L3: +[1-9][0-9]* tokens, .* as stored, zstd"
expect_out "compares the fast tier with fp16" "^vs fp16: +full cache at fp16 .*; fast tier \(L1\+L2\) .*: [0-9.]+x\$"
expect_out "lists the 15 retrieval heads, highest first" "^retrieval: +[0-9]+\.[0-9] [0-9.]+(, [0-9]+\.[0-9]+ [0-9.]+){14} \(layer\.head induction; the 15 heads hsq-decode fetches in full by default\)\$"
expect_out "says which heads keep residual key codes" "^residual: +15 heads keep a second 4-bit code of each key's error \(section keys\.residual\)\$"
expect_out "compares the fast tier and archive with fp16" "^ +fast tier \+ archive \(L1\+L2\+L3\) .*: [0-9.]+x \([0-9.]+x with L3 as stored, zstd\)\$"
expect_out "compares the file with fp16" "^ +file [0-9.]+ [KM]iB: [0-9.]+x\$"
rows=$(printf '%s\n' "$out" | sed -n '/^tier layout per layer/,$p' | grep -Ec '^  [0-9]+ ')
[ "$rows" -eq 30 ] && ok "the tier table has one row per layer" || fail "tier table has $rows layer rows"
expect_out "the tier table has a total" "^  total +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ "
run "$I" --heads "$S"; expect "--heads succeeds" 0 ""
rows=$(printf '%s\n' "$out" | grep -Ec '^  [0-9]+\.[0-9]+ ')
[ "$rows" -eq 90 ] && ok "--heads prints one row per layer and head" || fail "--heads printed $rows rows"
run "$I" --verify "$S"; expect "--verify of a good hsq snapshot exits 0" 0 ""
[ "$(printf '%s\n' "$out" | grep -cE ' ok$')" -eq 10 ] && ok "--verify marks the 10 sections ok" || fail "--verify output: $out"

run "$I" --json --verify "$S"; expect "--json --verify exits 0" 0 ""
printf '%s' "$out" > "$TMP/tiers.json"
if [ "$have_py" -eq 1 ]; then
	size=$(wc -c < "$S" | tr -d ' ')
	if python3 - "$TMP/tiers.json" "$size" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["mode"] == "hsq" and j["version"] == "1.6" and j["verified"] is True, j["mode"]
assert [s["name"] for s in j["sections"]] == ["meta", "tokens", "tiers", "l1", "l2", "l3.index", "l3", "router.heads", "centres", "keys.residual"]
assert all(s["checksum"] == "ok" for s in j["sections"])
t = j["tiers"]
assert t["mode"] == "hsq" and t["reader"] == "obs-attention" and t["compressor"] == "obs-weighted"
assert t["params"]["group_size"] == 16 and t["params"]["window"] == 64 and t["params"]["sinks"] == 4
h = t["heads"]
assert len(h) == 30 * 3 and [(x["layer"], x["head"]) for x in h] == [(l, k) for l in range(30) for k in range(3)]
assert all(0 <= x["induction"] <= 1 for x in h) and any(x["induction"] > 0 for x in h), "induction scores"
top = sorted(range(len(h)), key=lambda i: (-h[i]["induction"], i))[:15]
assert sorted(i for i in range(len(h)) if h[i]["retrieval"]) == sorted(top), "retrieval: the 15 top heads"
assert [x["residual_keys"] for x in h] == [x["retrieval"] for x in h], "residual keys: the retrieval heads"
tot = t["totals"]
for key, field in [("l1_tokens", "l1_tokens"), ("l2_low", "l2_low"), ("l2_medium", "l2_medium"),
                   ("l3_tokens", "l3_tokens"), ("l1_bytes", "l1_bytes"), ("l2_bytes", "l2_bytes"),
                   ("l3_bytes", "l3_bytes"), ("l3_stored_bytes", "l3_stored_bytes")]:
    assert tot[key] == sum(x[field] for x in h), key
assert tot["l2_groups"] == tot["l2_low"] + tot["l2_medium"] > 0 and tot["l3_tokens"] > 0
# every token of a head is in L1 or in the archive
assert all(x["l1_tokens"] + x["l3_tokens"] == j["n_tokens"] for x in h), "L1 + L3 != tokens"
fp16, r = t["fp16_bytes"], t["vs_fp16"]
assert fp16 == j["n_tokens"] * 30 * 2 * 3 * 64 * 2, fp16
assert abs(r["fast"] - (tot["l1_bytes"] + tot["l2_bytes"]) / fp16) < 1e-5
assert abs(r["fast_archive"] - (tot["l1_bytes"] + tot["l2_bytes"] + tot["l3_bytes"]) / fp16) < 1e-5
assert abs(r["file"] - int(sys.argv[2]) / fp16) < 1e-5
assert 0 < r["fast"] < r["fast_archive"] < 1
EOF
	then ok "--json holds the tiers, per head, with consistent totals and ratios"; else fail "--json tiers: $(head -c 300 "$TMP/tiers.json")"; fi
else
	expect_out "--json prints the tiers" '"tiers":\{"mode":"hsq"'
fi

# --- the trace report
run "$I" --trace "$T" --svg "$TMP/heat.svg" "$S"; expect "--trace --svg succeeds" 0 ""
[ -z "$err" ] && ok "--trace is quiet on stderr" || fail "stderr: $err"
expect_out "--trace counts lines and steps" "^trace: .*: $n_data lines, [0-9]+ steps \(positions [0-9]+\.\.[0-9]+\)"
expect_out "--trace gives the hit rate and coverage" "^router: +hit rate [0-9.]+% .*coverage [0-9.]+%"
rows=$(printf '%s\n' "$out" | sed -n '/^router hits per layer/,/^most fetched/p' | grep -Ec '^  [0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+% +[0-9.]+%$')
[ "$rows" -eq 30 ] && ok "hit rates for every layer" || fail "$rows hit-rate rows"
expect_out "--trace lists the 10 most fetched groups" "^most fetched groups \(top 10 of [0-9]+"
top=$(printf '%s\n' "$out" | sed -n '/^most fetched/,/^fetch heatmap/p' | grep -Ec '^ +[0-9]+ +[0-9]+ +[0-9]+ (low|medium) +[0-9]+ +[0-9]+% +[0-9]+-[0-9]+  ".*"(\.\.\.)?$')
[ "$top" -eq 10 ] && ok "each top group has its layer, head, id, fetches, positions and text" || fail "$top well-formed top rows: $out"
expect_out "--trace draws the heatmap" "^fetch heatmap: rows = layers, [0-9]+ columns"
rows=$(printf '%s\n' "$out" | grep -Ec '^ +[0-9]+ \|[ .:=+*#%@-]{32,64}\|$')
[ "$rows" -eq 30 ] && ok "the heatmap has one row per layer" || fail "$rows heatmap rows"
if [ -s "$TMP/heat.svg" ] && head -c 5 "$TMP/heat.svg" | grep -Eq '^(<\?xml|<svg)'; then
	ok "--svg writes an SVG file"
else
	fail "--svg file: $(head -c 100 "$TMP/heat.svg" 2>&1)"
fi
if [ "$have_py" -eq 1 ]; then
	python3 - "$TMP/heat.svg" <<'EOF' && ok "the SVG parses, one rect per cell" || fail "SVG check failed"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
assert len(rects) % 30 == 0 and len(rects) >= 30 * 32, len(rects)
texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
assert "layer" in texts and "position" in texts, texts
EOF
fi

run "$I" --json --trace "$T" --top 3 --heads "$S"; expect "--json --trace exits 0" 0 ""
printf '%s' "$out" > "$TMP/trace.json"
if [ "$have_py" -eq 1 ]; then
	python3 - "$TMP/trace.json" "$n_data" <<'EOF' && ok "--json holds the trace report" || fail "--json trace: $(head -c 300 "$TMP/trace.json")"
import json, sys
j = json.load(open(sys.argv[1]))
t = j["trace"]
assert t["lines"] == int(sys.argv[2]) and t["online_fetches"] == 0 and t["svg"] is None
assert t["first_position"] == j["n_tokens"], (t["first_position"], j["n_tokens"])
assert len(t["heads"]) == 90 and sum(h["lines"] for h in t["heads"]) == t["lines"]
for h in t["heads"]:
    assert h["hit_rate"] is None or 0 <= h["hit_rate"] <= 1
    assert h["coverage"] is None or 0 <= h["coverage"] <= 1
top = t["top"]
assert len(top) == 3 and top[0]["fetches"] >= top[1]["fetches"] >= top[2]["fetches"] > 0
heads = {(h["layer"], h["head"]): h for h in j["tiers"]["heads"]}
for g in top:
    h = heads[(g["layer"], g["head"])]
    assert 0 <= g["group"] < h["l2_low"] + h["l2_medium"]
    assert 0 <= g["first_position"] <= g["last_position"] < j["n_tokens"]
    assert isinstance(g["text"], str) and g["text"].strip(), g
assert t["text_note"] is None
hm = t["heatmap"]
assert len(hm["rows"]) == 30 and all(len(r) == hm["columns"] for r in hm["rows"])
assert 0 < hm["max"] <= 1 and max(max(r) for r in hm["rows"]) == hm["max"]
EOF
fi

# Without a usable model the top groups show positions, and say why.
run env HSQ_MODEL="$TMP/doc.txt" "$I" --trace "$T" "$S"
expect "--trace without a usable default model still succeeds" 0 ""
expect_out "...and says the text is left out" "positions instead of text: the default model could not be loaded"
run "$I" -m "$TMP/missing.gguf" --trace "$T" "$S"; expect "--trace -m with a missing model exits 3" 3 "missing.gguf"

# Online groups: a decode past the recent window adds groups after the
# snapshot's; their ids are accepted as far as they can exist.
if [ "$have_py" -eq 1 ]; then
	set -- $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); h=j["tiers"]["heads"][0]; print(j["n_tokens"], h["l2_low"] + h["l2_medium"])' "$TMP/tiers.json")
	n_tok=$1 n_grp=$2
	cp "$T" "$TMP/online.txt"
	printf '%d\t0\t0\t0,%d\n' $((n_tok + 64 + 16)) "$n_grp" >> "$TMP/online.txt"
	run "$I" --trace "$TMP/online.txt" "$S"; expect "an online group id that can exist is accepted" 0 ""
	expect_out "...and counted apart" "^online: +1 fetches"
	cp "$T" "$TMP/online.txt"
	printf '%d\t0\t0\t%d\n' $((n_tok + 64 + 16)) $((n_grp + 1)) >> "$TMP/online.txt"
	run "$I" --trace "$TMP/online.txt" "$S"
	expect "an online group id that cannot exist yet exits 4" 4 "online.txt:$((n_data + 2)): group $((n_grp + 1)) of layer 0 head 0 is out of range"
fi

# --- damaged traces: exit 4, naming the file and line
sed '5s/\t[^\t]*$/\t1,x/' "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a bad group list exits 4 naming the line" 4 "bad\.txt:5: bad group list at 'x'"
[ -z "$out" ] && ok "nothing on stdout after a trace error" || fail "stdout after an error: $(printf '%s' "$out" | head -c 200)"
sed '3s/\t[^\t]*$/\t99999/' "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a group out of range exits 4 naming the line" 4 "bad\.txt:3: group 99999 of layer [0-9]+ head [0-9]+ is out of range"
sed '4s/^\([0-9]*\)\t[0-9]*\t/\1\t30\t/' "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a layer out of range exits 4" 4 "bad\.txt:4: layer 30 is out of range"
sed '2s/^[0-9]*\t/7\t/' "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a position inside the snapshot exits 4" 4 "bad\.txt:2: position 7 is inside the snapshot"
sed '2s/\t[^\t]*$//' "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a missing field exits 4" 4 "bad\.txt:2: 3 fields, expected 4"
{ cat "$T"; sed -n 2p "$T"; } > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a repeated line exits 4" 4 "bad\.txt:$((n_data + 2)): position [0-9]+ of layer 0 head 0 comes after position"
head -n 1 "$T" > "$TMP/bad.txt"
run "$I" --trace "$TMP/bad.txt" "$S"; expect "a trace without lines exits 4" 4 "holds no trace lines"
run "$I" --trace "$TMP/missing.txt" "$S"; expect "a missing trace exits 4" 4 "cannot open .*missing\.txt"

# --- other modes
awk 'BEGIN { RS = ""; ORS = "\n\n" } NR <= 2' "$doc" > "$TMP/short.txt"
run "$P" -m "$M" --mode quant -t 2 -o "$TMP/q.hsq" -f "$TMP/short.txt"; expect "prefill --mode quant succeeds" 0 ""
run "$D" -m "$M" -s "$TMP/q.hsq" -t 2 -p " x" -n 1 --retrieval-heads 1
expect "--retrieval-heads on a quant snapshot exits 2" 2 "--budget, --retrieval-heads, --no-residual-keys and --trace need an hsq snapshot; .*q\.hsq is quant"
run "$D" -m "$M" -s "$TMP/q.hsq" -t 2 -p " x" -n 1 --no-residual-keys
expect "--no-residual-keys on a quant snapshot exits 2" 2 "need an hsq snapshot; .*q\.hsq is quant"
run "$I" "$TMP/q.hsq"; expect "inspect of a quant snapshot succeeds" 0 ""
expect_out "quant shows its mode" "mode: +quant"
expect_out "quant shows zero groups" "L2: +0 groups"
expect_out "quant shows an empty archive" "L3: +0 tokens"
expect_out "quant's total row has zero groups and L3 tokens" "^  total +[1-9][0-9]* +0 +0 +0 "
if [ "$have_py" -eq 1 ]; then
	run "$I" --json "$TMP/q.hsq"
	printf '%s' "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin); t = j["tiers"]["totals"]
assert j["mode"] == "quant" and t["l2_groups"] == 0 and t["l3_tokens"] == 0
assert t["l1_tokens"] == j["n_tokens"] * 90' && ok "quant --json: every token in L1, no groups" || fail "quant --json: $out"
fi
run "$I" --trace "$T" "$TMP/q.hsq"; expect "--trace on a quant snapshot exits 2" 2 "--trace needs an hsq snapshot.*quant snapshot"
head -n 1 "$doc" > "$TMP/title.txt"
run "$P" -m "$M" --mode full -t 2 -o "$TMP/f.hsq" -f "$TMP/title.txt"; expect "prefill --mode full succeeds" 0 ""
run "$I" --trace "$T" "$TMP/f.hsq"; expect "--trace on a full snapshot exits 2 and says why" 2 "--trace needs an hsq snapshot.*f\.hsq is a full snapshot; write one with hsq-prefill --mode hsq"

# --- a damaged tier section: exit 5 with or without --verify
if [ "$have_py" -eq 1 ]; then
	python3 - "$S" "$TMP/badl2.hsq" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n, = struct.unpack_from("<I", d, 40)
t, = struct.unpack_from("<Q", d, 32)
for i in range(n):
    e = t + 64 * i
    if d[e:e + 16].rstrip(b"\0").decode() == "l2":
        off, size = struct.unpack_from("<QQ", d, e + 16)
        d[off + size // 2] ^= 0x40
open(sys.argv[2], "wb").write(d)
EOF
	run "$I" "$TMP/badl2.hsq"; expect "a damaged l2 section exits 5 naming it" 5 "'l2'.*damaged|damaged.*l2"
	run "$I" --verify "$TMP/badl2.hsq"; expect "--verify of a damaged l2 exits 5" 5 "section 'l2' is damaged"
	printf '%s\n' "$out" | grep -Eq '^  l2 .* BAD$' && ok "the table marks l2 BAD" || fail "no BAD mark for l2: $out"
fi
finish
