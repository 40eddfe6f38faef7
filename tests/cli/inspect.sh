#!/bin/sh
# Black-box tests of hsq-inspect: output, --json, --verify, --tokens, --text,
# exit codes (0 ok, 2 usage, 3 model, 5 snapshot: hsq(7)), messages, and special
# files (FIFO, directory, device) given as the snapshot to hsq-inspect and hsq-decode.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
I="$HSQ_BIN/hsq-inspect"
P="$HSQ_BIN/hsq-prefill"
D="$HSQ_BIN/hsq-decode"

# --- usage (exit 2) and informational options, no model needed
run "$I"; expect "no snapshot is a usage error" 2 "no snapshot given"
run "$I" --bogus x.hsq; expect "unknown option exits 2" 2 "try 'hsq-inspect --help'"
run "$I" a.hsq b.hsq; expect "two snapshots are a usage error" 2 "one snapshot at a time"
run "$I" -m model.gguf a.hsq; expect "-m without --text is a usage error" 2 "only used with --text"
run "$I" --help; expect "--help exits 0" 0 ""
expect_out "--help shows the usage line" "^usage: hsq-inspect \[--verify\] \[--json\]"
for o in --verify --json --tokens --text --model --help --version; do
	printf '%s' "$out" | grep -q -- "$o" && ok "--help lists $o" || fail "--help does not list $o"
done
run "$I" -h; expect "-h exits 0" 0 ""
run "$I" --version; expect "--version exits 0" 0 ""
expect_out "--version prints the name and version" "^hsq-inspect [0-9]+\.[0-9]+\.[0-9]+$"
man_page="$here/../../man/hsq-inspect.1"
if [ -f "$man_page" ]; then
	usage=$("$I" --help | sed -n 's/^usage: //p')
	synopsis=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' "$man_page" | grep -v '^\.' | sed 's/\\-/-/g; s/\\f[BIR]//g' | tr -s ' \n' ' ' | sed 's/ $//')
	[ "$usage" = "$synopsis" ] && ok "man page SYNOPSIS matches --help" || fail "SYNOPSIS differs" "man: '$synopsis' help: '$usage'"
fi

# --- snapshot errors (exit 5), no model needed
run "$I" "$TMP/missing.hsq"; expect "missing snapshot exits 5 naming it" 5 "missing.hsq: No such file"
mkdir -p "$TMP/dir.hsq"
run "$I" "$TMP/dir.hsq"; expect "a directory exits 5" 5 "not a regular file"
: > "$TMP/empty.hsq"
run "$I" "$TMP/empty.hsq"; expect "empty file exits 5" 5 "empty file"
printf 'hello world, this is not a snapshot at all\n' > "$TMP/text.hsq"
run "$I" "$TMP/text.hsq"; expect "text file exits 5" 5 "not an hsq snapshot"
[ -z "$out" ] && ok "nothing on stdout after an error" || fail "stdout after an error: $out"

# Special files as the snapshot: refused at once (a FIFO must not wait for a
# writer), naming the file; timeout exits 124 when a tool blocks.
if mkfifo "$TMP/fifo.hsq" 2>/dev/null; then
	run timeout 10 "$I" "$TMP/fifo.hsq"
	expect "a FIFO exits 5 without blocking" 5 "fifo\.hsq: not a regular file \(a FIFO\)"
else
	echo "SKIP: mkfifo unavailable"
fi
run timeout 10 "$I" "$TMP/dir.hsq"
expect "a directory exits 5 naming it" 5 "dir\.hsq: not a regular file \(a directory\)"
if [ -c /dev/null ]; then
	run timeout 10 "$I" /dev/null
	expect "a character device exits 5" 5 "/dev/null: not a regular file \(a character device\)"
fi

if have_model; then
	M="$HSQ_TEST_MODEL"
	printf 'The Eiffel Tower is in Paris. The Colosseum is in Rome.' > "$TMP/doc.txt"
	run "$P" -m "$M" --mode full -o "$TMP/doc.hsq" < "$TMP/doc.txt"
	if [ "$rc" -ne 0 ]; then
		fail "hsq-prefill could not write a snapshot" "$err"
		finish
	fi
	S="$TMP/doc.hsq"
	size=$(wc -c < "$S" | tr -d ' ')
	if [ -p "$TMP/fifo.hsq" ]; then
		run timeout 10 "$D" -m "$M" -s "$TMP/fifo.hsq" -n 1
		expect "hsq-decode -s FIFO exits 5 without blocking" 5 "fifo\.hsq: not a regular file \(a FIFO\)"
	fi
	run timeout 10 "$D" -m "$M" -s "$TMP/dir.hsq" -n 1
	expect "hsq-decode -s DIRECTORY exits 5 naming it" 5 "dir\.hsq: not a regular file \(a directory\)"

	run "$I" "$S"; expect "inspect succeeds" 0 ""
	[ -z "$err" ] && ok "inspect is quiet on stderr" || fail "stderr: $err"
	expect_out "shows the format version" "hsq snapshot 1\.6"
	expect_out "shows the mode" "mode: +full"
	expect_out "shows the architecture" "model: +llama"
	expect_out "shows an identity prefix" "identity: +[0-9a-f]{16}"
	expect_out "shows the shape" "30 layers, 3 kv heads x 64"
	expect_out "shows the file size" "\($size bytes\)"
	expect_out "lists the meta section" "meta +[0-9]+ +128 +128 +raw"
	expect_out "lists the tokens section" "tokens +[0-9]+ +[0-9]+ +[0-9]+ +raw"
	expect_out "lists the kv.full section" "kv\.full +[0-9]+ +[0-9]+ +[0-9]+ +zstd"
	expect_out "compares the KV cache with fp16" "fp16"
	expect_out "says checksums were not verified" "not verified"
	n_tok=$(printf '%s' "$out" | sed -n 's/^tokens: *//p')
	[ "${n_tok:-0}" -gt 5 ] && ok "reports $n_tok tokens" || fail "token count '$n_tok'"

	run "$I" --verify "$S"; expect "--verify of a good file exits 0" 0 ""
	[ "$(printf '%s\n' "$out" | grep -cE ' ok$')" -eq 3 ] && ok "--verify marks the 3 sections ok" || fail "--verify output: $out"

	run "$I" --json --verify "$S"; expect "--json exits 0" 0 ""
	if command -v python3 >/dev/null 2>&1; then
		printf '%s' "$out" > "$TMP/out.json"
		if python3 - "$TMP/out.json" "$size" "$n_tok" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["version"] == "1.6" and j["mode"] == "full", j
assert j["file_size"] == int(sys.argv[2]), j["file_size"]
assert j["n_tokens"] == int(sys.argv[3]), j["n_tokens"]
assert j["model"]["architecture"] == "llama" and len(j["model"]["identity"]) == 64
assert [s["name"] for s in j["sections"]] == ["meta", "tokens", "kv.full"]
assert all(s["checksum"] == "ok" for s in j["sections"]) and j["verified"] is True
assert j["kv"]["fp16_bytes"] * 2 == j["kv"]["fp32_bytes"]
assert 0 < j["kv"]["stored_bytes"] <= j["kv"]["fp32_bytes"]
EOF
		then ok "--json is valid JSON with the expected fields"; else fail "--json output: $(head -c 300 "$TMP/out.json")"; fi
	else
		expect_out "--json prints an object" '^\{"file":'
	fi

	run "$I" --tokens "$S"; expect "--tokens exits 0" 0 ""
	ids=$(printf '%s\n' "$out" | sed -n '/^token ids:/,$p' | tail -n +2 | wc -w | tr -d ' ')
	[ "$ids" = "$n_tok" ] && ok "--tokens prints $n_tok ids" || fail "--tokens printed $ids ids, expected $n_tok"

	run "$I" --text -m "$M" "$S"; expect "--text exits 0" 0 ""
	expect_out "--text shows the document" "The Eiffel Tower is in Paris\. The Colosseum is in Rome\."
	run env HSQ_MODEL="$M" "$I" --text "$S"; expect "--text finds the model in HSQ_MODEL" 0 ""
	run "$I" --text -m "$TMP/missing.gguf" "$S"; expect "--text with a missing model exits 3" 3 "missing.gguf"

	# Another model (general.name changed: same weights, other identity).
	python3 - "$M" "$TMP/renamed.gguf" <<'EOF'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.index(b"general.name") + len(b"general.name") + 4 + 8
d[i] ^= 0x20
open(sys.argv[2], "wb").write(d)
EOF
	run "$I" --text -m "$TMP/renamed.gguf" "$S"; expect "--text with another model exits 5 naming both" 5 "built by model .*not by the given model"

	# Damage: a flipped byte in each section, truncation, bad magic, a newer version.
	for name in meta tokens kv.full; do
		python3 - "$S" "$TMP/bad.hsq" "$name" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n, = struct.unpack_from("<I", d, 40)
t, = struct.unpack_from("<Q", d, 32)
for i in range(n):
    e = t + 64 * i
    if d[e:e + 16].rstrip(b"\0").decode() == sys.argv[3]:
        off, size = struct.unpack_from("<QQ", d, e + 16)
        d[off + size // 2] ^= 0x40
open(sys.argv[2], "wb").write(d)
EOF
		run "$I" --verify "$TMP/bad.hsq"
		expect "--verify finds a flipped byte in $name (exit 5, names it)" 5 "section '$name' is damaged"
		if [ "$name" != meta ]; then
			printf '%s\n' "$out" | grep -Eq "^  $name .* BAD$" && ok "the table marks $name BAD" || fail "no BAD mark for $name: $out"
			run "$I" "$TMP/bad.hsq"; expect "without --verify a damaged $name still inspects" 0 ""
		fi
		run "$I" --json --verify "$TMP/bad.hsq"
		expect "--json --verify of a damaged $name exits 5" 5 "damaged"
	done
	for cut in 0 5 100 300 $((size / 2)) $((size - 1)); do
		head -c "$cut" "$S" > "$TMP/cut.hsq"
		run "$I" "$TMP/cut.hsq"
		if [ "$rc" -eq 5 ] && [ -n "$err" ]; then ok "a file cut at $cut bytes exits 5"; else fail "cut at $cut: exit $rc: $err"; fi
	done
	head -c 300 "$S" > "$TMP/cut.hsq"
	run "$I" "$TMP/cut.hsq"; expect "truncation is named as such" 5 "truncated"
	python3 -c "import sys; d=bytearray(open(sys.argv[1],'rb').read()); d[8]=2; open(sys.argv[2],'wb').write(d)" "$S" "$TMP/v2.hsq"
	run "$I" "$TMP/v2.hsq"; expect "a newer major version exits 5 suggesting an upgrade" 5 "newer.*upgrade hsq"
	ls -a "$TMP" | grep -q '\.tmp$' && fail "temporary files left: $(ls -a "$TMP")" || ok "no temporary files left behind"
fi
finish
