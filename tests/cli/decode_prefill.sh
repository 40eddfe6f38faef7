#!/bin/sh
# Black-box tests of hsq-decode and hsq-prefill: exit codes, stdout,
# stderr, every documented error (hsq(7) EXIT STATUS).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
D="$HSQ_BIN/hsq-decode"
P="$HSQ_BIN/hsq-prefill"

# --- usage errors (exit 2), no model needed
run "$D"; expect "decode without a prompt is a usage error" 2 "no prompt"
run "$D" -p hi -n abc; expect "decode -n abc is a usage error" 2 "-n expects an integer"
run "$D" -p hi --temp -1; expect "decode negative temperature is a usage error" 2 "--temp expects"
run "$D" -p hi --top-p 0; expect "decode top-p 0 is a usage error" 2 "--top-p expects"
run "$D" -p hi -f x; expect "decode -p and -f together is a usage error" 2 "not both"
run "$D" --bogus; expect "decode unknown option exits 2" 2 "try 'hsq-decode --help'"
run "$D" -p hi extra; expect "decode stray argument exits 2" 2 "unexpected argument 'extra'"
run "$P"; expect "prefill without -o is a usage error" 2 "no output file"
run "$P" -o x.hsq --mode banana; expect "prefill unknown mode is a usage error" 2 "--mode 'banana'"
run "$P" -o x.hsq --zstd-level 40; expect "prefill zstd level out of range" 2 "--zstd-level expects"

# --- model errors (exit 3)
run env HSQ_MODEL= HOME="$TMP/nohome" XDG_DATA_HOME= "$D" -p hi
expect "decode with no model installed exits 3 and says how to get one, -m its own hint" 3 "make model.*; or pass -m FILE$"
run "$D" -m "$TMP/missing.gguf" -p hi
expect "missing model exits 3 naming the file" 3 "missing.gguf: No such file"
mkdir -p "$TMP/dir.gguf"
run timeout 10 "$D" -m "$TMP/dir.gguf" -p hi
expect "a directory as model exits 3 naming it" 3 "dir.gguf: is a directory, not a regular file"
# A FIFO with no writer would block a plain open(): refused at once instead
# (timeout turns a hang into exit 124).
mkfifo "$TMP/fifo.gguf"
run timeout 10 "$D" -m "$TMP/fifo.gguf" -p hi
expect "a FIFO as model exits 3 without blocking, naming it" 3 "fifo.gguf: is a FIFO, not a regular file"
echo hello > "$TMP/doc.txt"
run timeout 10 "$P" -m "$TMP/fifo.gguf" -o "$TMP/fifo.hsq" -f "$TMP/doc.txt"
expect "prefill: a FIFO as model exits 3 without blocking" 3 "fifo.gguf: is a FIFO"
run timeout 10 "$D" -m /dev/null -p hi
expect "a character device as model exits 3 naming it" 3 "/dev/null: is a character device"
if [ "$(id -u)" -ne 0 ]; then
	printf 'GGUF' > "$TMP/noperm.gguf"; chmod 000 "$TMP/noperm.gguf"
	run "$D" -m "$TMP/noperm.gguf" -p hi; expect "unreadable model exits 3" 3 "Permission denied"
else
	echo "SKIP: unreadable-model test (running as root, permissions do not apply)"
fi

if have_model; then
	M="$HSQ_TEST_MODEL"
	python3 "$here/mkbad.py" "$M" "$TMP/bad" || fail "mkbad.py could not write the damaged models"
	run "$D" -m "$TMP/bad/notgguf.gguf" -p hi; expect "non-GGUF file exits 3" 3 "not a GGUF file"
	run "$D" -m "$TMP/bad/empty.gguf" -p hi; expect "empty model file exits 3" 3 "not a GGUF file"
	run "$D" -m "$TMP/bad/truncated.gguf" -p hi; expect "truncated model exits 3" 3 "truncated|extends past the end"
	run "$D" -m "$TMP/bad/badarch.gguf" -p hi; expect "unsupported architecture exits 3 naming it" 3 "architecture 'mamba' is not supported"
	run "$D" -m "$TMP/bad/badtype.gguf" -p hi; expect "unsupported tensor type exits 3 naming it" 3 "token_embd.weight' has type IQ4_NL"
	run "$D" -m "$TMP/bad/badversion.gguf" -p hi; expect "unsupported GGUF version exits 3" 3 "GGUF version 99"
	rm -rf "$TMP/bad"

	# --- generation
	run "$D" -m "$M" -p "The capital of France is" -n 8
	expect "greedy decode succeeds" 0 ""
	expect_out "greedy decode names Paris" "Paris"
	first="$out"
	run "$D" -m "$M" -p "The capital of France is" -n 8
	[ "$out" = "$first" ] && ok "greedy decode is deterministic" || fail "greedy decode differs between runs"
	run env HSQ_MODEL="$M" "$D" -p "The capital of France is" -n 8
	[ "$out" = "$first" ] && ok "HSQ_MODEL replaces -m" || fail "HSQ_MODEL run differs: $out"
	run "$D" -m "$M" -p "Once upon a time" -n 16 --temp 0.9 --top-k 40 --top-p 0.9 --seed 7
	a="$out"
	run "$D" -m "$M" -p "Once upon a time" -n 16 --temp 0.9 --top-k 40 --top-p 0.9 --seed 7
	[ "$out" = "$a" ] && [ -n "$a" ] && ok "sampling with a seed is repeatable" || fail "seeded sampling not repeatable"
	run "$D" -m "$M" -p "Once upon a time" -n 16 --temp 0.9 --seed 8
	[ "$out" != "$a" ] && ok "another seed samples differently" || fail "seed 8 gave the same text as seed 7"
	run "$D" -m "$M" --chat -p "What is the capital of France? Answer in one word." -n 16
	expect "chat decode succeeds" 0 ""
	expect_out "chat answer names Paris" "Paris"
	printf 'The capital of France is' > "$TMP/prompt.txt"
	run "$D" -m "$M" -f "$TMP/prompt.txt" -n 8
	[ "$out" = "$first" ] && ok "-f reads the prompt from a file" || fail "-f output differs: $out"
	run "$D" -m "$M" -p "" -n 4; expect "empty prompt exits 4" 4 "prompt is empty"
	run "$D" -m "$M" -p hi -c 100000; expect "context longer than the model's exits 4, the tool naming -c" 4 "longer than the model's 8192.*; -c sets the context size$"
	run "$D" -m "$M" -p "one two three four five six seven eight" -c 4; expect "prompt longer than -c exits 4, the tool naming -c" 4 "do not fit.*; -c sets the context size$"

	# --- prefill errors and snapshot round trip
	run "$P" -m "$M" -o "$TMP/e.hsq" < /dev/null; expect "empty document exits 4" 4 "document is empty"
	[ ! -e "$TMP/e.hsq" ] && ok "failed prefill leaves no file" || fail "failed prefill left $TMP/e.hsq"
	printf 'a\0b' > "$TMP/nul.txt"
	run "$P" -m "$M" -o "$TMP/n.hsq" -f "$TMP/nul.txt"; expect "binary document exits 4" 4 "NUL byte"
	run "$P" -m "$M" -o "$TMP/x.hsq" -f "$TMP/none.txt"; expect "missing document exits 4" 4 "cannot open"
	seq 1 3000 | tr '\n' ' ' > "$TMP/long.txt"
	run "$P" -m "$M" -o "$TMP/l.hsq" -c 256 -f "$TMP/long.txt"; expect "document longer than -c exits 4" 4 "longer than the requested context of 256"
	printf 'The Eiffel Tower is in Paris. The Colosseum is in Rome.' > "$TMP/doc.txt"
	run "$P" -m "$M" --mode full -o "$TMP/doc.hsq" < "$TMP/doc.txt"
	expect "prefill writes a snapshot" 0 ""
	[ -s "$TMP/doc.hsq" ] && ok "snapshot file exists" || fail "no snapshot file"
	ls "$TMP" | grep -q '\.tmp' && fail "temporary files left behind: $(ls "$TMP")" || ok "no temporary files left"
	run "$D" -m "$M" -s "$TMP/doc.hsq" -p " The Colosseum is in" -n 6
	resumed="$out"
	run "$D" -m "$M" -p "The Eiffel Tower is in Paris. The Colosseum is in Rome. The Colosseum is in" -n 6
	[ "$resumed" = "$out" ] && ok "resume from snapshot equals a single pass" || fail "resume '$resumed' != single pass '$out'"
	run "$D" -m "$M" -s "$TMP/doc.hsq" -n 4; expect "resume without a prompt exits 4" 4 "nothing to continue from"
	run "$D" -m "$M" -s "$TMP/missing.hsq" -p x; expect "missing snapshot exits 5" 5 "missing.hsq"
	head -c 100 "$TMP/doc.hsq" > "$TMP/cut.hsq"
	run "$D" -m "$M" -s "$TMP/cut.hsq" -p x; expect "truncated snapshot exits 5" 5 "cut.hsq"
	run "$D" -m "$M" -s "$TMP/doc.txt" -p x; expect "non-snapshot exits 5" 5 "doc.txt"
	run "$P" -m "$M" -o "$TMP/nodir/x.hsq" < "$TMP/doc.txt"; expect "unwritable output exits 5" 5 "nodir"

	# --chat: prefill opens a user turn, decode closes it, even when the
	# document starts with white space or spells a special token
	printf '\n\n  Indented start. <|im_end|> The code word is AMBER.' > "$TMP/ws.txt"
	run "$P" -m "$M" --chat -o "$TMP/ws.hsq" -f "$TMP/ws.txt"; expect "chat prefill succeeds" 0 ""
	run "$D" -m "$M" -s "$TMP/ws.hsq" --chat -p "What is the code word?" -n 16
	expect "chat resume succeeds" 0 ""
	expect_out "chat resume answers from the document" "AMBER"
	printf 'a\0b' > "$TMP/nulprompt.txt"
	run "$D" -m "$M" -f "$TMP/nulprompt.txt"; expect "prompt file with a NUL byte exits 4" 4 "NUL byte"
fi
finish
