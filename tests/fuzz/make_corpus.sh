#!/bin/sh
# make_corpus.sh [BINDIR] - regenerate the seed inputs of tests/fuzz/corpus/
# and the tiny models of tests/fuzz/models/ (run from the top of the tree,
# after `make all`; BINDIR defaults to build/bin). The committed corpora
# also hold inputs the campaigns found, minimized with -merge=1; this
# script only rewrites the named seeds.
set -eu
bin=${1:-build/bin}
c=tests/fuzz/corpus
mkdir -p $c/gguf $c/snapshot $c/calib tests/fuzz/models
python3 tests/fuzz/make_corpus.py $c/gguf
cp $c/gguf/tiny-llama.gguf $c/gguf/tiny-spm.gguf tests/fuzz/models/
m=tests/fuzz/models/tiny-llama.gguf
doc="the cat sat on the mat and the hat in a bag. the end of the tale is near"
tiers="--sinks 2 --window 4 --group-size 8 --obs-window 4"
echo "the cat sat on the mat" | "$bin/hsq-prefill" -m $m -t 1 --mode full -o $c/snapshot/s-full.hsq
for mode in quant hsq streaming snapkv; do
	echo "$doc" | "$bin/hsq-prefill" -m $m -t 1 --mode $mode $tiers -o $c/snapshot/s-$mode.hsq
done
echo "$doc" | "$bin/hsq-prefill" -m $m -t 1 --mode hsq --sinks 2 --window 4 --group-size 16 \
	--medium-fraction 0.5 --residual-heads all --key-rounding nearest --reader key-norm --compressor mean \
	-o $c/snapshot/s-hsq2.hsq
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -Iinclude tests/fuzz/gen_calib.c build/libhsq.a -lzstd -lpcre2-8 -lutf8proc -lm -lpthread -o "$tmp/gen_calib"
"$tmp/gen_calib" $c/calib
chmod 644 $c/calib/*
mkdir -p $c/hsqc
${CC:-cc} -Iinclude -Ilib tests/fuzz/gen_hsqc.c build/libhsq-train.a build/libhsq.a -lzstd -lpcre2-8 -lutf8proc -lm -lpthread -o "$tmp/gen_hsqc"
"$tmp/gen_hsqc" $c/hsqc
chmod 644 $c/hsqc/*
