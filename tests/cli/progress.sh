#!/bin/sh
# progress.sh - hsq-prefill's progress line: tokens done, rate and time
# left on a terminal (a pseudo-terminal from script(1)); nothing when
# standard error is a file or a pipe, or with -q.
. "$(dirname "$0")/lib.sh"
P="$HSQ_BIN/hsq-prefill"
have_model || finish
if ! command -v script >/dev/null 2>&1; then
	echo "SKIP: progress on a terminal (script(1) not found; apt-get install bsdutils)"
	finish
fi
M=$HSQ_TEST_MODEL
seq 1 700 | tr '\n' ' ' > "$TMP/doc.txt"

# on a terminal: a line per chunk, the last one complete
script -qec "'$P' -m '$M' -b 128 -o '$TMP/a.hsq' -f '$TMP/doc.txt'" /dev/null > "$TMP/tty.out" 2>&1
tr '\r' '\n' < "$TMP/tty.out" > "$TMP/tty.lines"
if grep -Eq '^hsq-prefill: [0-9]+/[0-9]+ tokens, [0-9.]+ tokens/s, [0-9]+ s left' "$TMP/tty.lines"; then
	ok "a terminal shows tokens done, the rate and the time left"
else
	fail "no progress line on a terminal" "$(head -c 300 "$TMP/tty.lines")"
fi
n=$(grep -Eo '^hsq-prefill: [0-9]+/' "$TMP/tty.lines" | sort -u | wc -l)
[ "$n" -ge 2 ] && ok "the line is redrawn as the document runs ($n states)" || fail "one progress state only" "$n"
grep -Eq '^hsq-prefill: ([0-9]+)/\1 tokens' "$TMP/tty.lines" && ok "the last state is the whole document" ||
	fail "the progress never reached the whole document"
[ -s "$TMP/a.hsq" ] && ok "the snapshot is written" || fail "no snapshot"

# -q on a terminal: nothing
script -qec "'$P' -m '$M' -b 128 -q -o '$TMP/b.hsq' -f '$TMP/doc.txt'" /dev/null > "$TMP/quiet.out" 2>&1
grep -q 'tokens' "$TMP/quiet.out" && fail "-q still shows progress" "$(head -c 200 "$TMP/quiet.out")" ||
	ok "-q shows no progress on a terminal"

# standard error a file: nothing, and the snapshot is the same
run "$P" -m "$M" -b 128 -o "$TMP/c.hsq" -f "$TMP/doc.txt"
expect "a prefill with standard error to a file exits 0" 0 ""
[ -z "$err" ] && ok "no progress when standard error is not a terminal" || fail "progress written to a file" "$err"
cmp -s "$TMP/a.hsq" "$TMP/c.hsq" && ok "the progress line does not change the snapshot" || fail "snapshots differ"
finish
