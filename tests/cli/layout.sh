#!/bin/sh
# layout.sh - the architecture as the tree states it, checked:
#  1. no file in lib/ includes a header of a higher layer (the order is
#     LIB_LAYERS in the Makefile, then the wings eval and train);
#     hsq_eval.h only in lib/eval, hsq_train.h only in lib/train;
#  2. the tools (cmd/) include only the public headers and their own;
#  3. libhsq.so exports exactly the functions the installed headers
#     declare with HSQ_API, every one of them named hsq_*;
#  4. no string in lib/ names a tool's flag (-c, --budget): the tools
#     add their own hints to the library's messages.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1

layers=$(sed -n 's/^LIB_LAYERS *= *//p' Makefile)
[ -n "$layers" ] || fail "Makefile names LIB_LAYERS" "no LIB_LAYERS line"
layers="$layers eval train"

# layer_of DIR: the position of DIR (a folder under lib/) in the order, or
# nothing when the folder is not a layer.
layer_of() {
	i=0
	for l in $layers; do
		i=$((i + 1))
		[ "$l" = "$1" ] && { echo $i; return; }
	done
}

bad=
for f in $(find lib -name '*.[ch]' | sort); do
	dir=${f#lib/}
	dir=${dir%/*}
	mine=$(layer_of "$dir")
	if [ -z "$mine" ]; then
		bad="$bad
$f: lib/$dir is not a layer (add it to LIB_LAYERS in the Makefile)"
		continue
	fi
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		hsq.h|hsq_codec.h) continue ;;
		hsq_eval.h)
			[ "$dir" = eval ] || bad="$bad
$f: includes hsq_eval.h (the evaluation wing) from the runtime"
			continue ;;
		hsq_train.h)
			[ "$dir" = train ] || bad="$bad
$f: includes hsq_train.h (the training wing) from the runtime"
			continue ;;
		esac
		if [ ! -f "lib/$inc" ]; then
			bad="$bad
$f: includes \"$inc\", which is not lib/$inc (write includes from lib/)"
			continue
		fi
		theirs=$(layer_of "${inc%/*}")
		if [ -z "$theirs" ] || [ "$theirs" -gt "$mine" ]; then
			bad="$bad
$f: includes $inc, of a higher layer (${inc%/*} above $dir)"
		fi
	done
done
if [ -z "$bad" ]; then ok "lib/ includes only its own layer and the layers below"; else fail "include graph of lib/" "$bad"; fi

bad=
for f in $(find cmd -name '*.[ch]' | sort); do
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		[ -f "include/$inc" ] || [ -f "${f%/*}/$inc" ] || [ -f "cmd/$inc" ] ||
			bad="$bad
$f: includes \"$inc\", neither a public header (include/) nor one of cmd/"
	done
done
if [ -z "$bad" ]; then ok "the tools include only include/ and cmd/ headers"; else fail "tool includes" "$bad"; fi

# String literals of lib/ outside comments, one per line, then any word
# that looks like an option.
flags=$(for f in $(find lib -name '*.c' | sort); do
	sed 's|/\*.*\*/||g' "$f" | grep -o '"\([^"\\]\|\\.\)*"' | sed "s|^|$f: |"
done | grep -E "[\"( ']--?[a-zA-Z][a-zA-Z-]*([ ,);']|\"\$)")
if [ -z "$flags" ]; then ok "no library message names a tool's flag"; else fail "library messages name a tool's flag" "$flags"; fi

so=${HSQ_LIBDIR:-$root/build}/libhsq.so
if [ ! -f "$so" ]; then
	fail "exported symbols" "$so is missing (make all builds it)"
	finish
fi
if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: exported symbols (nm not found; apt-get install binutils)"
	finish
fi
nm -D --defined-only "$so" | awk '$2 ~ /^[TtWDBRVi]$/ {print $3}' | sort -u > "$TMP/exported"
sed -n 's/^HSQ_API [^(]*[ *]\(hsq_[a-z0-9_]*\)(.*/\1/p' include/hsq.h include/hsq_codec.h | sort -u > "$TMP/declared"
[ -s "$TMP/declared" ] || fail "the installed headers declare HSQ_API functions" "none found"
if grep -v '^hsq_' "$TMP/exported" > "$TMP/foreign"; then
	fail "libhsq.so exports only hsq_ names" "$(tr '\n' ' ' < "$TMP/foreign")"
else
	ok "libhsq.so exports only hsq_ names"
fi
extra=$(comm -23 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
missing=$(comm -13 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
if [ -n "$extra" ]; then fail "libhsq.so exports nothing the installed headers do not declare" "$extra"; else ok "libhsq.so exports nothing the installed headers do not declare ($(wc -l < "$TMP/exported") functions)"; fi
if [ -n "$missing" ]; then fail "libhsq.so exports every function of the installed headers" "$missing"; else ok "libhsq.so exports every function of the installed headers"; fi
finish
