#!/bin/sh
# install-deps.sh - install the Debian packages hsq needs, only those missing.
# Runs apt-get as root (or through sudo). Safe to run repeatedly.
set -eu

# package:file-that-proves-it-is-installed
need="gcc:/usr/bin/gcc make:/usr/bin/make pkg-config:/usr/bin/pkg-config
libzstd-dev:/usr/include/zstd.h libcriterion-dev:/usr/include/criterion/criterion.h
libpcre2-dev:/usr/include/pcre2.h libutf8proc-dev:/usr/include/utf8proc.h
libopenblas-dev:/usr/include/x86_64-linux-gnu/cblas.h python3:/usr/bin/python3
python3-pip:/usr/lib/python3/dist-packages/pip python3-venv:/usr/lib/python3/dist-packages/ensurepip
ca-certificates:/etc/ssl/certs/ca-certificates.crt time:/usr/bin/time zstd:/usr/bin/zstd
binutils:/usr/bin/nm clang:/usr/bin/clang
libclang-rt-14-dev:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a"

missing=
for entry in $need; do
	pkg=${entry%%:*}
	file=${entry#*:}
	[ -e "$file" ] && continue
	# pip may come from elsewhere (pyenv, venv): accept any working pip
	if [ "$pkg" = python3-pip ] && python3 -m pip --version >/dev/null 2>&1; then continue; fi
	if [ "$pkg" = python3-venv ] && python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then continue; fi
	if [ "$pkg" = libopenblas-dev ] && [ ! -e /usr/include/x86_64-linux-gnu/cblas.h ] &&
		ls /usr/include/*/openblas*/cblas.h >/dev/null 2>&1; then continue; fi
	missing="$missing $pkg"
done

if [ -z "$missing" ]; then
	echo "deps: all Debian packages present"
	exit 0
fi
echo "deps: installing$missing"
if [ "$(id -u)" -eq 0 ]; then
	sudo=
elif command -v sudo >/dev/null 2>&1; then
	sudo=sudo
else
	echo "deps: missing packages:$missing; run as root: apt-get install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
