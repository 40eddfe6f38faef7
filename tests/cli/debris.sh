#!/bin/sh
# debris.sh - hsq-prefill leaves no temporary file behind: SIGINT, SIGTERM
# and SIGHUP at any moment (here after 0.2 s, after 1 s, and while the
# snapshot is being written) leave the destination either as it was or
# the new complete snapshot, and nothing else in its directory; a later
# run removes what a SIGKILL left (the library's ".NAME.XXXXXXXX.tmp"),
# but not a temporary file a live process holds, nor any other file.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
P="$HSQ_BIN/hsq-prefill"
I="$HSQ_BIN/hsq-inspect"

have_model || finish
M="$HSQ_TEST_MODEL"
D="$TMP/dest"
mkdir "$D"
printf 'The Eiffel Tower is in Paris.' > "$TMP/short.txt"
# long enough that the prefill and the write of a full snapshot take a while
seq 1 250 | tr '\n' ' ' > "$TMP/long.txt"
LONG="-c 4096 --mode full --zstd-level 12"

run "$P" -m "$M" -o "$D/doc.hsq" -f "$TMP/short.txt"; expect "the old snapshot is written" 0 ""
cp "$D/doc.hsq" "$TMP/old.hsq"

# temp_of: the temporary file being written in $D, if any
temp_of() { ls -A "$D" | grep -E '^\.doc\.hsq\.[0-9a-f]{8}\.tmp$' | head -n 1; }

# A background job of a shell script starts with SIGINT ignored, and a
# tool keeps a signal ignored that it was started with: dfl runs its
# command with SIGINT at its default action, in place of the background
# job's shell (so that $! is the tool's process).
dfl() { exec python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' "$@"; }

# interrupt SIG WHEN: starts a long prefill onto $D/doc.hsq and sends SIG
# after WHEN seconds, or (WHEN = write) once its temporary file exists.
interrupt() {
	sig=$1 when=$2
	dfl "$P" -m "$M" $LONG -o "$D/doc.hsq" -f "$TMP/long.txt" 2>"$TMP/int.err" &
	pid=$!
	if [ "$when" = write ]; then
		i=0
		while [ -z "$(temp_of)" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 6000 ]; do
			sleep 0.02
			i=$((i + 1))
		done
		[ -n "$(temp_of)" ] && seen=1 || seen=0
	else
		sleep "$when"
	fi
	kill -s "$sig" "$pid" 2>/dev/null
	wait "$pid"
	st=$?
	left=$(ls -A "$D" | tr '\n' ' ')
	name="SIG$sig at $when"
	[ "$when" = write ] || name="SIG$sig after $when s"
	[ -s "$TMP/int.err" ] && fail "$name: no message" "$(cat "$TMP/int.err")"
	if [ "$left" != "doc.hsq " ]; then
		fail "$name leaves only the destination" "exit $st; left: $left"
	elif cmp -s "$D/doc.hsq" "$TMP/old.hsq"; then
		ok "$name leaves only the destination, the old snapshot (exit $st)"
	elif "$I" --verify "$D/doc.hsq" > /dev/null 2>&1; then
		ok "$name leaves only the destination, a complete new snapshot (exit $st)"
		cp "$D/doc.hsq" "$TMP/old.hsq"
	else
		fail "$name leaves the old snapshot or a complete new one" "exit $st; doc.hsq is neither"
	fi
	if [ "$when" = write ]; then
		[ "$seen" = 1 ] && [ "$st" -gt 128 ] && ok "SIG$sig came while the snapshot was being written" ||
			fail "SIG$sig came while the snapshot was being written" "temporary file seen: $seen, exit $st"
	fi
}

for sig in INT TERM HUP; do
	interrupt $sig 0.2
	interrupt $sig 1
	interrupt $sig write
done

# a signal ignored at the start stays ignored (nohup): the run completes
"$P" -m "$M" -o "$D/doc.hsq" -f "$TMP/long.txt" -c 4096 &
pid=$!
while [ -z "$(temp_of)" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
kill -s INT "$pid" 2>/dev/null
wait "$pid"
st=$?
[ "$st" -eq 0 ] && [ "$(ls -A "$D")" = doc.hsq ] && "$I" --verify "$D/doc.hsq" > /dev/null 2>&1 &&
	ok "SIGINT ignored at the start (a background job) does not stop the write" ||
	fail "SIGINT ignored at the start (a background job) does not stop the write" "exit $st; $(ls -A "$D")"

# SIGKILL during the write leaves the temporary file; the next run removes it
"$P" -m "$M" $LONG -o "$D/doc.hsq" -f "$TMP/long.txt" 2>/dev/null &
pid=$!
i=0
while [ -z "$(temp_of)" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 6000 ]; do sleep 0.02; i=$((i + 1)); done
kill -s KILL "$pid" 2>/dev/null
wait "$pid"
stale=$(temp_of)
[ -n "$stale" ] && ok "SIGKILL during the write leaves a temporary file (nothing can remove it then)" ||
	fail "SIGKILL during the write leaves a temporary file" "$(ls -A "$D")"
# beside it: files the clean-up must not touch
: > "$D/.doc.hsq.1234567.tmp"         # 7 digits
: > "$D/.doc.hsq.1234abcdX.tmp"       # more after the digits
: > "$D/.doc.hsq.1234ABCD.tmp"        # upper case
: > "$D/.other.hsq.12345678.tmp"      # another destination's
: > "$D/doc.hsq.12345678.tmp"         # no leading dot
: > "$D/.doc.hsq.0000000f.tmp"        # the pattern, but newer than the run
touch -d '+1 hour' "$D/.doc.hsq.0000000f.tmp"
: > "$D/.doc.hsq.abcdef01.tmp"        # the pattern, held by a live process
touch -d '1 hour ago' "$D/.doc.hsq.abcdef01.tmp"
python3 -c 'import fcntl, sys, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(300)' \
	"$D/.doc.hsq.abcdef01.tmp" &
holder=$!
sleep 0.3
run "$P" -m "$M" -v -o "$D/doc.hsq" -f "$TMP/short.txt"
expect "the next run succeeds and says it removed the stale file" 0 "removed 1 temporary file that an interrupted run left beside .*doc.hsq"
[ ! -e "$D/$stale" ] && ok "the next run removed the stale temporary file" || fail "the stale file $stale is still there"
for f in .doc.hsq.1234567.tmp .doc.hsq.1234abcdX.tmp .doc.hsq.1234ABCD.tmp .other.hsq.12345678.tmp doc.hsq.12345678.tmp \
	.doc.hsq.0000000f.tmp .doc.hsq.abcdef01.tmp; do
	[ -e "$D/$f" ] && ok "kept $f" || fail "removed $f, which is not a stale temporary of doc.hsq"
done
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
run "$P" -m "$M" -o "$D/doc.hsq" -f "$TMP/short.txt"
[ ! -e "$D/.doc.hsq.abcdef01.tmp" ] && ok "once its process is gone, the held file goes too" ||
	fail "the file no process holds any more is still there"
finish
