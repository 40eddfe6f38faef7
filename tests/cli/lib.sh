# lib.sh - helpers for the black-box tests (sourced).
# run CMD...: runs CMD with the caller's stdin (redirect it at the call),
# capturing $out, $err and $rc.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hsq-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
# The tools cache model identities under XDG_CACHE_HOME: keep the tests' own.
XDG_CACHE_HOME="$TMP/cache"; export XDG_CACHE_HOME
n_fail=0

run() {
	"$@" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	out=$(cat "$TMP/out")
	err=$(cat "$TMP/err")
}

ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; [ -n "${2:-}" ] && printf '     %s\n' "$2"; n_fail=$((n_fail + 1)); }

# expect NAME RC PATTERN: last run exited RC and stderr matches PATTERN (grep -E).
expect() {
	if [ "$rc" -ne "$2" ]; then
		fail "$1" "exit $rc, expected $2; stderr: $err"
	elif [ -n "${3:-}" ] && ! printf '%s' "$err" | grep -Eq -- "$3"; then
		fail "$1" "stderr does not match /$3/: $err"
	else
		ok "$1"
	fi
}

# expect_out NAME PATTERN: last run's stdout matches PATTERN.
expect_out() {
	if printf '%s' "$out" | grep -Eq -- "$2"; then ok "$1"; else fail "$1" "stdout does not match /$2/: $(printf '%s' "$out" | head -c 400)"; fi
}

have_model() {
	if [ -n "${HSQ_TEST_MODEL:-}" ] && [ -f "$HSQ_TEST_MODEL" ]; then return 0; fi
	echo "SKIP: model-based tests (HSQ_TEST_MODEL not set or missing; run 'make model')"
	return 1
}

finish() {
	if [ "$n_fail" -ne 0 ]; then echo "$n_fail failure(s)"; exit 1; fi
	exit 0
}
