#!/bin/sh
# output_checks.sh - hsq-prefill's -o and hsq-eval's outputs (--json,
# --csv, --report, --log, codecs -o) are checked before the model is
# loaded and the work done: an empty path is a usage error (2); a
# directory, a special file, a missing or unwritable directory fail at
# once (prefill 5, eval 1), naming the path and the fix. The runs below
# name a missing model: a check made before the model fails on the output,
# one made after would report the model (3).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
P="$HSQ_BIN/hsq-prefill"
E="$HSQ_BIN/hsq-eval"
NOMODEL="$TMP/missing.gguf"
mkdir "$TMP/adir"
: > "$TMP/plain"
printf 'The Eiffel Tower is in Paris.' > "$TMP/doc.txt"

# --- hsq-prefill -o
run "$P" -m "$NOMODEL" -o "" -f "$TMP/doc.txt"; expect "prefill -o '' is a usage error" 2 "-o needs a non-empty path"
run "$P" -m "$NOMODEL" -o "$TMP/adir" -f "$TMP/doc.txt"
expect "prefill -o DIR fails before the model" 5 "cannot write .*/adir \(-o\): it is a directory; name a file"
run "$P" -m "$NOMODEL" -o "$TMP/adir/" -f "$TMP/doc.txt"
expect "prefill -o DIR/ fails before the model" 5 "adir/ \(-o\): it is a directory"
run "$P" -m "$NOMODEL" -o "$TMP/nodir/x.hsq" -f "$TMP/doc.txt"
expect "prefill -o in a missing directory fails before the model" 5 "cannot write .*nodir/x.hsq \(-o\): directory .*nodir: No such file or directory; create it first"
run "$P" -m "$NOMODEL" -o "$TMP/plain/x.hsq" -f "$TMP/doc.txt"
expect "prefill -o under a plain file fails before the model" 5 "plain is not a directory"
run "$P" -m "$NOMODEL" -o /dev/null -f "$TMP/doc.txt"
expect "prefill -o /dev/null is refused, not replaced" 5 "/dev/null \(-o\): it is a device, pipe or socket"
[ -c /dev/null ] && ok "/dev/null is still a device" || fail "/dev/null was replaced"
if [ "$(id -u)" -ne 0 ]; then
	mkdir "$TMP/ro" && chmod 555 "$TMP/ro"
	run "$P" -m "$NOMODEL" -o "$TMP/ro/x.hsq" -f "$TMP/doc.txt"
	expect "prefill -o in a read-only directory fails before the model" 5 "cannot create files in the directory .*ro: Permission denied"
else
	echo "SKIP: read-only directory test (running as root)"
fi
run "$P" -m "$NOMODEL" -o "$TMP/ok.hsq" -f "$TMP/doc.txt"
expect "a good -o gets as far as the model" 3 "missing.gguf"

# --- hsq-eval: the model runs (ppl stands for needle, agree and bench: one driver)
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --json "$TMP/adir" "$TMP/doc.txt"
expect "eval --json DIR fails before the model" 1 "cannot write .*adir \(--json\): it is a directory"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --csv "$TMP/nodir/x.csv" "$TMP/doc.txt"
expect "eval --csv in a missing directory fails before the model" 1 "nodir/x.csv \(--csv\): directory .*nodir: No such file or directory; create it first"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --report "$TMP/plain" "$TMP/doc.txt"
expect "eval --report FILE fails before the model" 1 "plain \(--report\): it is not a directory"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --report "$TMP/nodir/rep" "$TMP/doc.txt"
expect "eval --report in a missing directory fails before the model" 1 "nodir/rep \(--report\): directory .*nodir: No such file"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/nodir/l.jsonl" "$TMP/doc.txt"
expect "eval --log in a missing directory fails before the model" 1 "nodir/l.jsonl \(--log\): directory .*nodir: No such file"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/adir" "$TMP/doc.txt"
expect "eval --log DIR fails before the model" 2 "--log .*adir is a directory"
: > "$TMP/old.jsonl"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/old.jsonl" "$TMP/doc.txt"
expect "eval with an existing log fails before the model" 2 "old.jsonl exists"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --json "" "$TMP/doc.txt"
expect "eval --json '' is a usage error" 2 "--json needs a non-empty path"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --json /dev/null "$TMP/doc.txt"
expect "eval --json /dev/null is refused" 1 "/dev/null \(--json\): it is a device"
run "$E" ppl -m "$NOMODEL" -q --log "$TMP/l1.jsonl" --json "$TMP/ok.json" --report "$TMP/rep" "$TMP/doc.txt"
expect "good eval outputs get as far as the model" 3 "missing.gguf"
[ ! -e "$TMP/l1.jsonl" ] && [ ! -e "$TMP/rep" ] && ok "the checks create nothing" || fail "the checks left files: $(ls "$TMP")"

# --- hsq-eval codecs -o PREFIX: checked before the study runs (nothing printed)
mkdir "$TMP/taken.csv"
run "$E" codecs --seeds 2 --regimes isotropic --codecs plain --bits 3 -o "$TMP/taken"
expect "codecs -o whose PREFIX.csv is a directory fails before the study" 1 "taken.csv \(-o\): it is a directory"
[ -z "$out" ] && ok "codecs printed no table: the study did not run" || fail "codecs ran the study before failing" "$out"
run "$E" codecs --seeds 2 -o "$TMP/nodir/x"; expect "codecs -o in a missing directory exits 1" 1 "cannot write .*x.csv \(-o\): directory .*nodir"
run "$E" codecs --seeds 2 -o ""; expect "codecs -o '' is a usage error" 2 "non-empty"

# no internal function name in the tools' messages: no string literal of
# cmd/ names one (hsq_eval_log is a key of the trial log's format)
for f in $(find "$here/../../cmd" -name '*.c' | sort); do
	sed 's|/\*.*\*/||g' "$f" | grep -v '^#include' | grep -o '"\([^"\\]\|\\.\)*"' |
		grep -E '\b(hsq|writer|atomic|eval|cli|snap|log|json|tier|cleanup)_[a-z_]+' | grep -v 'hsq_eval_log' |
		sed "s|^|${f##*/cmd/}: |"
done > "$TMP/names"
[ -s "$TMP/names" ] && fail "the tools' messages name no internal function" "$(cat "$TMP/names")" ||
	ok "the tools' messages name no internal function"
finish
