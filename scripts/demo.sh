#!/bin/sh
# demo.sh BINDIR MODEL - what hsq is for, on a document the project ships
# (share/varn-island.txt, about 2,800 tokens): compress it once into a
# snapshot in the default mode (hsq), show the snapshot and its fast tier
# against the fp16 KV cache, answer two questions from the one snapshot,
# time an answer against re-reading the document, and show which groups the
# router fetched for one answer. Every command is printed, exactly as it
# runs, before it runs.
set -eu
bin=${1:?usage: demo.sh BINDIR MODEL}
model=${2:?usage: demo.sh BINDIR MODEL}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hsq-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

doc=share/varn-island.txt
snap=$tmp/varn.hsq
trace=$tmp/answer.trace
q1="Who was the first keeper of the Varn Island light?"
q2="When was the light automated?"

# show WORD...: the command line as a shell would take it back.
show() {
	printf '\n$'
	for a in "$@"; do
		case $a in
		*[!A-Za-z0-9_./=:+-]* | '') printf " '%s'" "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")" ;;
		*) printf ' %s' "$a" ;;
		esac
	done
	printf '\n'
}
now() { date +%s.%N; }
# timed VAR WORD...: show and run the command, VAR = its wall time in s;
# its standard output is kept in $tmp/VAR.out as well.
timed() {
	var=$1
	shift
	show "$@"
	t0=$(now)
	"$@" > "$tmp/$var.out"
	cat "$tmp/$var.out"
	eval "$var=\$(awk -v a=$t0 -v b=$(now) 'BEGIN { printf \"%.2f\", b - a }')"
}

echo "== 1. Compress the document once: a snapshot in the default mode, hsq"
timed t_prefill "$bin/hsq-prefill" -m "$model" --chat -v -o "$snap" -f "$doc"

echo
echo "== 2. What the snapshot holds, against the same KV cache at fp16"
printf '\n$ %s\n' "$bin/hsq-inspect $snap | sed -n '/^tokens:/p; /^L[123]:/p; /^vs fp16:/,/^ *file /p'"
"$bin/hsq-inspect" "$snap" | sed -n '/^tokens:/p; /^L[123]:/p; /^vs fp16:/,/^ *file /p'

echo
echo "== 3. Two questions answered from the one snapshot (the document is not read again)"
timed t_answer "$bin/hsq-decode" -m "$model" -s "$snap" --chat -n 48 --trace "$trace" -p "$q1"
echo
timed t_answer2 "$bin/hsq-decode" -m "$model" -s "$snap" --chat -n 48 -p "$q2"
echo

echo
echo "== 4. The first question without the snapshot: the document is read again"
{ cat "$doc"; printf '\n\n%s' "$q1"; } > "$tmp/document-and-question.txt"
printf '\n$ %s\n' "{ cat $doc; printf '\\n\\n%s' '$q1'; } > $tmp/document-and-question.txt"
timed t_reread "$bin/hsq-decode" -m "$model" --chat -n 48 -f "$tmp/document-and-question.txt"
echo

echo
echo "== 5. Which groups of the archive the router fetched for the first answer"
printf '\n$ %s\n' "$bin/hsq-inspect --trace $trace --top 5 -m $model $snap | sed -n '/^most fetched/,\$p'"
"$bin/hsq-inspect" --trace "$trace" --top 5 -m "$model" "$snap" | sed -n '/^most fetched/,$p'

fp16=$("$bin/hsq-inspect" "$snap" | sed -n 's/^vs fp16: *full cache at fp16 \([0-9.]* [KMG]iB\); fast tier (L1+L2) \([0-9.]* [KMG]iB\): \([0-9.]*x\)$/\1 \2 \3/p')
file=$("$bin/hsq-inspect" "$snap" | sed -n 's/^ *file \([0-9.]* [KMG]iB\): \([0-9.]*x\)$/\1 \2/p')
echo
echo "== What to notice"
set -- $fp16
[ $# -eq 5 ] && echo "- the KV cache of the document is $1 $2 at fp16; the fast tier that decoding keeps at hand (L1 and L2) is $3 $4, $5 of it"
set -- $file
[ $# -eq 3 ] && echo "- the snapshot file, archive included, is $1 $2 ($3 of the fp16 cache), and nothing in it is lost: the archive holds every token"
echo "- compressing the document took $t_prefill s, once; the answers from the snapshot took $t_answer s and $t_answer2 s"
if cmp -s "$tmp/t_answer.out" "$tmp/t_reread.out"; then same="the same answer"; else same="an answer of its own"; fi
echo "- answering the same question by reading the document again took $t_reread s, and gave $same"
echo "- each step of an answer read only the groups of the archive the router chose (step 5: the most fetched, and where in the document each layer read)"
