#!/bin/sh
# run.sh - runs every black-box tool test in tests/cli (each *.sh but this
# one and lib.sh). Env: HSQ_BIN (tools), HSQ_TEST_MODEL (default model).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${HSQ_BIN:?set HSQ_BIN to the directory holding the hsq tools}"
HSQ_BIN=$(cd "$HSQ_BIN" && pwd)
export HSQ_BIN
failed=0
for t in "$here"/*.sh; do
	case $(basename "$t") in run.sh|lib.sh) continue ;; esac
	echo "== $(basename "$t")"
	if ! sh "$t"; then
		echo "FAIL: $(basename "$t")"
		failed=$((failed + 1))
	fi
done
if [ "$failed" -ne 0 ]; then
	echo "cli: $failed test script(s) failed"
	exit 1
fi
echo "cli: all test scripts passed"
