#!/bin/sh
# stdout_errors.sh - hsq-decode and hsq-inspect check every write to
# standard output and its final flush and close (hsq(7), EXIT STATUS): a
# full disk is exit 1 with a message; a closed pipe ends them silently by
# SIGPIPE (status 141 in a shell), whether or not SIGPIPE was ignored.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
D="$HSQ_BIN/hsq-decode"
I="$HSQ_BIN/hsq-inspect"

# run_full CMD...: runs CMD with standard output on /dev/full; $rc, $err.
run_full() {
	"$@" >/dev/full 2>"$TMP/err"
	rc=$?
	err=$(cat "$TMP/err")
}

if [ -w /dev/full ]; then
	run_full "$I" --help; expect "inspect --help > /dev/full exits 1 with a message" 1 "^hsq-inspect: cannot write standard output: No space left on device"
	run_full "$D" --version; expect "decode --version > /dev/full exits 1 with a message" 1 "^hsq-decode: cannot write standard output"
else
	echo "SKIP: /dev/full tests (no writable /dev/full)"
fi

# status_of READER CMD...: runs CMD with standard output into READER (a
# command word, run by sh -c); sets $st to CMD's status, $err to its
# standard error, $secs to the seconds the pipeline took.
status_of() {
	reader=$1
	shift
	t0=$(date +%s)
	{ "$@" 2>"$TMP/perr"; echo $? > "$TMP/pst"; } | sh -c "$reader" > /dev/null
	secs=$(( $(date +%s) - t0 ))
	st=$(cat "$TMP/pst")
	err=$(cat "$TMP/perr")
}

if have_model; then
	M="$HSQ_TEST_MODEL"
	if [ -w /dev/full ]; then
		run_full "$D" -m "$M" -p "Once upon a time" -n 8
		expect "decode > /dev/full exits 1 with a message" 1 "^hsq-decode: cannot write standard output: No space left on device"
		[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && ok "decode > /dev/full reports once" || fail "decode > /dev/full reported more than once: $err"
	fi
	printf 'The Eiffel Tower is in Paris. The Colosseum is in Rome.' > "$TMP/doc.txt"
	run "$HSQ_BIN/hsq-prefill" -m "$M" -o "$TMP/doc.hsq" -f "$TMP/doc.txt"; expect "prefill for the inspect tests" 0 ""
	if [ -w /dev/full ]; then
		run_full "$I" --json "$TMP/doc.hsq"
		expect "inspect --json > /dev/full exits 1 with a message" 1 "^hsq-inspect: cannot write standard output: No space left on device"
		run_full "$I" "$TMP/doc.hsq"
		expect "inspect > /dev/full exits 1 with a message" 1 "^hsq-inspect: cannot write standard output"
		run "$I" --json "$TMP/doc.hsq"
		expect "inspect --json to a file still exits 0" 0 ""
	fi

	status_of "head -c 1" "$D" -m "$M" -p "Once upon a time" -n 64 --ignore-eos
	if [ "$st" -eq 141 ] && [ -z "$err" ] && [ "$secs" -lt 30 ]; then ok "decode -n 64 | head -c 1 ends promptly by SIGPIPE, silently"
	else fail "decode -n 64 | head -c 1 ends promptly by SIGPIPE, silently" "status $st after ${secs}s; stderr: $err"; fi
	# SIGPIPE ignored by the parent: the same outcome, not 64 tokens into a closed pipe
	status_of "head -c 1" sh -c 'trap "" PIPE; exec "$@"' sh "$D" -m "$M" -p "Once upon a time" -n 64 --ignore-eos
	if [ "$st" -eq 141 ] && [ -z "$err" ]; then ok "decode with SIGPIPE ignored still ends by SIGPIPE, silently"
	else fail "decode with SIGPIPE ignored still ends by SIGPIPE, silently" "status $st; stderr: $err"; fi
	# (a reader that closes the pipe at once: inspect's text would fit in
	# the pipe before head had read its byte)
	status_of true sh -c 'trap "" PIPE; exec "$@"' sh "$I" --json --tokens "$TMP/doc.hsq"
	if [ "$st" -eq 141 ] && [ -z "$err" ]; then ok "inspect with SIGPIPE ignored ends by SIGPIPE, silently"
	else fail "inspect with SIGPIPE ignored ends by SIGPIPE, silently" "status $st; stderr: $err"; fi
fi
finish
