#!/bin/sh
# bounded_input.sh - a document or prompt longer than the context could
# ever hold is refused while it is read (exit 4), not read whole first:
# /dev/zero ends at once instead of filling memory.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
D="$HSQ_BIN/hsq-decode"
P="$HSQ_BIN/hsq-prefill"

if have_model; then
	M="$HSQ_TEST_MODEL"
	run timeout 20 "$P" -m "$M" -o "$TMP/z.hsq" -f /dev/zero
	expect "prefill -f /dev/zero ends at once with exit 4" 4 "/dev/zero is over [0-9]+ bytes, more than the model's context of [0-9]+ tokens could hold; shorten it$"
	run timeout 20 "$P" -m "$M" -o "$TMP/z.hsq" -c 64 < /dev/zero
	expect "prefill < /dev/zero with -c ends at once, naming -c" 4 "standard input is over 16384 bytes.*requested context of 64 tokens.*raise -c$"
	[ ! -e "$TMP/z.hsq" ] && ok "the refused document leaves no snapshot" || fail "a snapshot was written"
	run timeout 20 "$D" -m "$M" -f /dev/zero -n 1
	expect "decode -f /dev/zero ends at once with exit 4" 4 "/dev/zero is over [0-9]+ bytes, more than the context of [0-9]+ tokens could hold; shorten it$"
	run sh -c 'cat /dev/zero | timeout 20 "$1" -m "$2" -f - -c 32 -n 1' sh "$D" "$M"
	expect "decode -f - from an endless pipe ends at once, naming -c" 4 "standard input is over 8192 bytes.*raise -c$"
	# a document just under the bound is read whole, and refused for its tokens
	head -c 16384 /dev/zero | tr '\0' 'a' > "$TMP/a.txt"
	run "$P" -m "$M" -o "$TMP/a.hsq" -c 64 -f "$TMP/a.txt"
	expect "a document within the byte bound is refused for its tokens" 4 "tokens, longer than the requested context of 64"
	run "$P" -m "$M" -o "$TMP/a.hsq" -f "$TMP/none.txt"
	expect "a missing document is still reported" 4 "cannot open .*none.txt"
fi
finish
