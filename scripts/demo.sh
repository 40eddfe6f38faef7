#!/bin/sh
# demo.sh BINDIR MODEL - prefill the shipped sample document into a snapshot,
# then answer a question about it from the snapshot.
set -eu
bin=${1:?usage: demo.sh BINDIR MODEL}
model=${2:?usage: demo.sh BINDIR MODEL}
here=$(cd "$(dirname "$0")/.." && pwd)
doc="$here/share/sample-document.txt"
snap="${TMPDIR:-/tmp}/hsq-demo.$$.hsq"
trap 'rm -f "$snap"' EXIT INT TERM

question="Who was the first keeper of the Varn Island light, and how long did she serve?"
echo "== hsq-prefill --chat -o $snap < share/sample-document.txt"
"$bin/hsq-prefill" -m "$model" --mode full --chat -v -o "$snap" < "$doc"
echo "== hsq-inspect $snap"
"$bin/hsq-inspect" "$snap"
echo "== hsq-decode -s $snap --chat -p \"$question\""
"$bin/hsq-decode" -m "$model" -s "$snap" --chat -n 64 -p "$question"
