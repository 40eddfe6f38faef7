#!/bin/sh
# gemma3 end to end (HSQ_TEST_GEMMA): generation, chat, and snapshot resume
# across sliding-window layers whose ring (window 512 + batch) has wrapped.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
D="$HSQ_BIN/hsq-decode"
P="$HSQ_BIN/hsq-prefill"
G=${HSQ_TEST_GEMMA:-}
if [ -z "$G" ] || [ ! -f "$G" ]; then
	echo "SKIP: gemma3 tests (HSQ_TEST_GEMMA not set or missing; run 'make gemma')"
	finish
fi
# gemma-3-270m is a small base model: correctness of its outputs is the
# golden tests' job (logits against numpy and llama.cpp); here, the tools.
run "$D" -m "$G" -p "The capital of France is" -n 8
expect "gemma3 greedy decode succeeds" 0 ""
expect_out "gemma3 continues the prompt" "France"
run "$D" -m "$G" --chat -p "What is the capital of Italy?" -n 8
expect "gemma3 chat (gemma turn template) succeeds" 0 ""
# ~1300 tokens: more than the 512 + 256 rows a sliding-window layer keeps at -b 256
cat "$here/../../share/sample-document.txt" "$here/../../share/sample-document.txt" > "$TMP/doc.txt"
run "$P" -m "$G" -c 2048 -b 256 --mode full -o "$TMP/doc.hsq" -f "$TMP/doc.txt"
expect "gemma3 prefill writes a snapshot" 0 ""
run "$D" -m "$G" -c 2048 -s "$TMP/doc.hsq" -p " The first keeper was" -n 8
resumed=$out
{ cat "$TMP/doc.txt"; printf ' The first keeper was'; } > "$TMP/all.txt"
run "$D" -m "$G" -c 2048 -f "$TMP/all.txt" -n 8
[ -n "$resumed" ] && [ "$resumed" = "$out" ] && ok "gemma3 resume equals a single pass past the window" ||
	fail "gemma3 resume '$resumed' != single pass '$out'"
# the tiers with sliding-window layers: those keep only their window in L1
run "$P" -m "$G" -c 2048 -b 256 -o "$TMP/doc-hsq.hsq" -f "$TMP/doc.txt"
expect "gemma3 hsq prefill (the default mode) writes a snapshot" 0 ""
run "$D" -m "$G" -c 2048 -s "$TMP/doc-hsq.hsq" -p " The first keeper was" -n 8 --trace "$TMP/g.trace"
expect "gemma3 decodes from an hsq snapshot" 0 ""
[ -n "$out" ] && ok "gemma3 hsq decode prints text" || fail "gemma3 hsq decode printed nothing"
grep -q '^[0-9]' "$TMP/g.trace" && ok "gemma3 hsq decode writes a trace" || fail "gemma3 trace is empty"
finish
