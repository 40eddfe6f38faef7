#!/bin/sh
# make install into a DESTDIR: every file lands, and a program built with
# the installed header, library and pkg-config file links and runs.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
top=$(cd "$here/../.." && pwd)
dest="$TMP/dest"
prefix=/opt/hsq-test
if ! make -s -C "$top" install DESTDIR="$dest" PREFIX="$prefix" >"$TMP/log" 2>&1; then
	fail "make install DESTDIR=... PREFIX=$prefix" "$(tail -n 5 "$TMP/log")"
	finish
fi
ok "make install into DESTDIR"
root="$dest$prefix"
for f in bin/hsq-decode bin/hsq-prefill bin/hsq-inspect include/hsq.h include/hsq_codec.h lib/libhsq.a lib/libhsq.so \
	lib/libhsq.so.0 lib/pkgconfig/hsq.pc share/man/man1/hsq-decode.1 share/man/man5/hsq-snapshot.5 \
	share/man/man7/hsq.7 share/bash-completion/completions/hsq-decode share/zsh/site-functions/_hsq; do
	[ -e "$root/$f" ] && ok "installed $f" || fail "installed $f" "missing under $root"
done
if [ -e "$root/include/hsq_eval.h" ]; then
	fail "hsq_eval.h (libhsq-eval's header) is not installed" "found under $root/include"
else
	ok "hsq_eval.h (libhsq-eval's header) is not installed"
fi
grep -q "^prefix=$prefix\$" "$root/lib/pkgconfig/hsq.pc" && ok "hsq.pc names the prefix, not DESTDIR" ||
	fail "hsq.pc prefix" "$(head -n 1 "$root/lib/pkgconfig/hsq.pc")"
cat > "$TMP/use.c" <<'C'
#include <hsq.h>
#include <stdio.h>
int main(void) { printf("%s %s\n", hsq_version(), hsq_strerror(HSQ_ERR_CHECKSUM)); return 0; }
C
libs=$(sed -n 's/^Libs.private: //p' "$root/lib/pkgconfig/hsq.pc")
if cc -I"$root/include" "$TMP/use.c" "$root/lib/libhsq.a" $libs -o "$TMP/use" 2>"$TMP/err"; then
	run "$TMP/use"
	expect_out "a program links against the installed static library" "^[0-9]+\.[0-9]+\.[0-9]+ checksum mismatch$"
else
	fail "static link against the installed library" "$(cat "$TMP/err")"
fi
if cc -I"$root/include" "$TMP/use.c" -L"$root/lib" -lhsq -o "$TMP/use_so" 2>"$TMP/err"; then
	run env LD_LIBRARY_PATH="$root/lib" "$TMP/use_so"
	expect_out "a program links against the installed shared library" "checksum mismatch"
else
	fail "shared link against the installed library" "$(cat "$TMP/err")"
fi
finish
