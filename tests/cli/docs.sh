#!/bin/sh
# docs.sh - the documentation and the completions match the tools.
# For every hsq-* tool in $HSQ_BIN (and every subcommand of a dispatcher
# such as hsq-eval):
#   - --help exits 0 and prints a usage line; --version prints "TOOL VERSION"
#     (the same version for every tool); an unknown option exits 2 with
#     "try 'TOOL --help'";
#   - every option (from --dump-options, or parsed from --help for a tool
#     without it) appears in completions/hsq.bash and completions/_hsq, in
#     that tool's entry, and bash really completes it;
#   - the committed completions are what scripts/gen-completions.sh makes of
#     these tools now, and both files parse (bash -n, zsh -n when zsh exists);
#   - man/TOOL.1 exists, its SYNOPSIS is the usage line of --help (from the
#     roff source, and as rendered by man(1) when it is installed), and every
#     long option of --help appears in it;
#   - man/hsq.7 names every tool and lists every exit status of cmd/common/cli.h.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
: "${HSQ_BIN:?set HSQ_BIN to the directory holding the hsq tools}"
bash_c="$root/completions/hsq.bash"
zsh_c="$root/completions/_hsq"
TAB=$(printf '\t')

tools=
for p in "$HSQ_BIN"/hsq-*; do
	[ -f "$p" ] && [ -x "$p" ] && tools="$tools ${p##*/}"
done
if [ -z "$tools" ]; then
	fail "tools in $HSQ_BIN" "no hsq-* tools there"
	finish
fi

# ------------------------------------------------------------ helpers

# norm: one line, runs of white space collapsed, trimmed.
norm() { tr '\n\t' '  ' | sed 's/  */ /g; s/^ //; s/ $//'; }

# usage_of FILE: the usage lines of a --help output, one per line: the
# "usage: X" line and the indented lines right after it that start with the
# same program name.
usage_of() {
	awk '
	/^[Uu]sage:[ \t]/ { sub(/^[Uu]sage:[ \t]+/, ""); print; prog = $1; inu = 1; next }
	inu && /^[ \t]+[^ \t]/ { l = $0; sub(/^[ \t]+/, "", l); split(l, w, /[ \t]+/); if (w[1] == prog) { print l; next } }
	{ inu = 0 }' "$1" | sed 's/[ \t]*$//'
}

# opts_of TOOL [SUB]: the options of a (sub)command, one per line (long
# options as --name, short ones as -x): --dump-options when the tool has it,
# else the option lines of --help.
opts_of() {
	if "$HSQ_BIN/$1" ${2:+"$2"} --dump-options >"$TMP/dump" 2>/dev/null </dev/null && [ -s "$TMP/dump" ] &&
		! grep -Ev "^--[A-Za-z0-9][-A-Za-z0-9_]*${TAB}(-[A-Za-z0-9]| )?${TAB}" "$TMP/dump" >/dev/null; then
		awk -F'\t' '{ print $1; s = $2; gsub(/ /, "", s); if (s != "") print s }' "$TMP/dump"
	else
		"$HSQ_BIN/$1" ${2:+"$2"} --help 2>/dev/null </dev/null | awk '
		{ l = $0; sub(/^[ \t]+/, "", l) }
		l !~ /^-/ { next }
		{
			if (match(l, /^-[A-Za-z0-9]([, ]|$)/)) print substr(l, 1, 2)
			if (match(l, /--[A-Za-z0-9][-A-Za-z0-9_]*/)) print substr(l, RSTART, RLENGTH)
		}'
	fi
}

# subs_of TOOL: subcommands listed under a "commands:" / "subcommands:"
# heading of --help.
subs_of() {
	"$HSQ_BIN/$1" --help 2>/dev/null </dev/null | awk '
	/^[A-Za-z][A-Za-z ]*:[ \t]*$/ { h = tolower($0); next }
	/^[ \t]*$/ { h = ""; next }
	h ~ /command/ && /^[ \t]+[a-z][-a-z0-9]*([ \t]|$)/ { print $1 }'
}

# roff_text FILE [SECTION]: the page's text with roff requests and escapes
# removed (only SECTION when given), one line per input line.
roff_text() {
	awk -v want="${2:-}" '
	function unesc(s) {
		gsub(/\\f(\[[^]]*\]|\(..|.)/, "", s)
		gsub(/\\\(em/, "--", s); gsub(/\\\(en/, "-", s); gsub(/\\\(hy/, "-", s)
		gsub(/\\\(lq|\\\(rq/, "\"", s)
		gsub(/\\-/, "-", s); gsub(/\\[ ~0]/, " ", s); gsub(/\\[&|^%:c]/, "", s); gsub(/\\e/, "\\", s)
		return s
	}
	function args(s, a,    n, q) {
		n = 0
		while (s != "") {
			sub(/^[ \t]+/, "", s)
			if (s == "") break
			if (substr(s, 1, 1) == "\"") {
				s = substr(s, 2); q = index(s, "\"")
				if (!q) q = length(s) + 1
				a[++n] = substr(s, 1, q - 1); s = substr(s, q + 1)
			} else {
				match(s, /^[^ \t]+/); a[++n] = substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
			}
		}
		return n
	}
	/^[.\047]\\"/ { next }
	/^\.SH/ { l = $0; sub(/^\.SH[ \t]+/, "", l); gsub(/"/, "", l); sect = l; if (want == "") print l; next }
	want != "" && sect != want { next }
	/^[.\047]/ {
		m = $0; sub(/^[.\047][ \t]*/, "", m); rest = m
		sub(/[ \t].*/, "", m); sub(/^[^ \t]+[ \t]*/, "", rest)
		n = args(rest, a); t = ""
		if (m ~ /^(B|I|R|SM|SB)$/) { for (i = 1; i <= n; i++) t = t (i > 1 ? " " : "") a[i] }
		else if (m ~ /^(BR|RB|BI|IB|IR|RI)$/) { for (i = 1; i <= n; i++) t = t a[i] }
		else if (m == "SY") t = a[1]
		else if (m == "OP") { t = "[" a[1]; for (i = 2; i <= n; i++) t = t " " a[i]; t = t "]" }
		else if (m ~ /^(TP|IP|TQ|SS|PP|P|LP|RS|RE|nf|fi|br|sp)$/) { if (n && m != "RS") print unesc(rest); next }
		else next
		print unesc(t)
		next
	}
	{ print unesc($0) }' "$1"
}

# rendered_synopsis FILE: the SYNOPSIS as man(1) renders it, on one line.
rendered_synopsis() {
	LC_ALL=C MANWIDTH=1000 MANPAGER=cat PAGER=cat man -l "$1" 2>/dev/null | sed 's/.\x08//g' |
		awk '/^SYNOPSIS/ { s = 1; next } s && /^[A-Z]/ { exit } s' | norm
}

# has_opt TEXT-FILE OPT: OPT (an option name) occurs as a whole word.
has_opt() {
	grep -Eq -- "(^|[^-A-Za-z0-9_])$2([^-A-Za-z0-9_]|\$)" "$1"
}

# --------------------------------------------------- every tool and subcommand
version=
for tool in $tools; do
	bin="$HSQ_BIN/$tool"

	run "$bin" --help </dev/null
	if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | head -n 1 | grep -Eq "^usage: $tool( |\$)"; then
		ok "$tool --help: exit 0, usage line"
	else
		fail "$tool --help: exit 0, usage line" "exit $rc; first line: $(printf '%s\n' "$out" | head -n 1)"
	fi
	printf '%s\n' "$out" >"$TMP/help.$tool"

	run "$bin" --version </dev/null
	v=${out#"$tool "}
	if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -Eq "^$tool [0-9]+\.[0-9]+\.[0-9]+([-+.][0-9A-Za-z.]+)?\$"; then
		if [ -z "$version" ] || [ "$v" = "$version" ]; then
			ok "$tool --version: '$out'"
		else
			fail "$tool --version" "'$out', but another tool says $version"
		fi
		[ -n "$version" ] || version=$v
	else
		fail "$tool --version prints '$tool VERSION'" "exit $rc: $out"
	fi

	run "$bin" --no-such-option-xyzzy </dev/null
	expect "$tool --no-such-option-xyzzy: exit 2, points to --help" 2 "try '$tool --help'"

	subs=$(subs_of "$tool")
	for s in $subs; do
		run "$bin" "$s" --help </dev/null
		if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | head -n 1 | grep -Eq "^usage: $tool $s( |\$)"; then
			ok "$tool $s --help: exit 0, usage line"
		else
			fail "$tool $s --help: exit 0, usage line" "exit $rc; first line: $(printf '%s\n' "$out" | head -n 1)"
		fi
		printf '%s\n' "$out" >"$TMP/help.$tool.$s"
		run "$bin" "$s" --no-such-option-xyzzy </dev/null
		expect "$tool $s --no-such-option-xyzzy: exit 2, points to --help" 2 "try '$tool --help'"
	done

	# ---- completions: every option in the tool's entry of both files
	for s in "" $subs; do
		name="$tool${s:+ $s}"
		fn="_$(printf '%s' "$name" | sed 's/[^A-Za-z0-9][^A-Za-z0-9]*/_/g')"
		opts=$(opts_of "$tool" "$s")
		if [ -z "$opts" ]; then
			fail "$name: options found" "neither --dump-options nor --help listed any"
			continue
		fi
		grep -F -- "'$name')" "$bash_c" >"$TMP/bash_entry" 2>/dev/null
		awk -v f="$fn() {" '$0 == f { p = 1 } p { print } p && /^}/ { exit }' "$zsh_c" >"$TMP/zsh_entry" 2>/dev/null
		miss_b= miss_z=
		for o in $opts; do
			has_opt "$TMP/bash_entry" "$o" || miss_b="$miss_b $o"
			case $o in
			--*) grep -Eq -- "$o(=|\[|\})" "$TMP/zsh_entry" || miss_z="$miss_z $o" ;;
			*) grep -Eq -- "[{']$o(\+|,|\[)" "$TMP/zsh_entry" || miss_z="$miss_z $o" ;;
			esac
		done
		if [ -z "$miss_b" ]; then ok "$name: all $(echo $opts | wc -w) options in completions/hsq.bash"
		else fail "$name: options in completions/hsq.bash" "missing:$miss_b (run sh scripts/gen-completions.sh build/bin)"; fi
		if [ -z "$miss_z" ]; then ok "$name: all options in completions/_hsq"
		else fail "$name: options in completions/_hsq" "missing:$miss_z (run sh scripts/gen-completions.sh build/bin)"; fi

		# bash really offers them: complete "NAME -"
		if command -v bash >/dev/null 2>&1; then
			got=$(bash -c '. "$1"; shift; COMP_WORDS=("$@" -); COMP_CWORD=$#; _hsq; printf "%s\n" "${COMPREPLY[@]}"' \
				sh "$bash_c" $name 2>&1)
			miss=
			for o in $opts; do printf '%s\n' "$got" | grep -qx -- "$o" || miss="$miss $o"; done
			if [ -z "$miss" ]; then ok "$name: bash completes every option after '-'"
			else fail "$name: bash completes every option after '-'" "missing:$miss"; fi
		fi
	done

	# ---- man page
	page="$root/man/$tool.1"
	if [ ! -f "$page" ]; then
		fail "$tool: man page man/$tool.1 exists"
		continue
	fi
	ok "$tool: man page man/$tool.1 exists"
	roff_text "$page" SYNOPSIS | norm >"$TMP/syn"
	syn=$(cat "$TMP/syn")
	if [ -z "$subs" ]; then
		usage_of "$TMP/help.$tool" >"$TMP/usage"
	else
		# A dispatcher's real usage is its subcommands'.
		: >"$TMP/usage"
		for s in $subs; do usage_of "$TMP/help.$tool.$s" >>"$TMP/usage"; done
	fi
	n_usage=$(wc -l <"$TMP/usage")
	if [ "$n_usage" -eq 1 ]; then
		u=$(norm <"$TMP/usage")
		if [ "$syn" = "$u" ]; then ok "$tool.1: SYNOPSIS is the usage line"
		else fail "$tool.1: SYNOPSIS is the usage line" "man:   '$syn'
     --help: '$u'"; fi
		if command -v man >/dev/null 2>&1; then
			r=$(rendered_synopsis "$page")
			if [ "$r" = "$u" ]; then ok "$tool.1: SYNOPSIS as rendered by man is the usage line"
			else fail "$tool.1: SYNOPSIS as rendered by man is the usage line" "man:   '$r'
     --help: '$u'"; fi
		fi
	else
		missing=
		while IFS= read -r u; do
			u=$(printf '%s' "$u" | norm)
			case " $syn " in *" $u "*) ;; *) missing="$missing '$u'" ;; esac
		done <"$TMP/usage"
		if [ -n "$missing" ] || [ "$n_usage" -eq 0 ]; then
			fail "$tool.1: SYNOPSIS holds every usage line" "missing:$missing; SYNOPSIS: '$syn'"
		else
			ok "$tool.1: SYNOPSIS holds all $n_usage usage lines"
		fi
	fi
	roff_text "$page" >"$TMP/page"
	miss=
	for s in "" $subs; do
		for o in $(opts_of "$tool" "$s"); do
			case $o in --*) has_opt "$TMP/page" "$o" || miss="$miss $o" ;; esac
		done
	done
	if [ -z "$miss" ]; then ok "$tool.1: documents every long option"
	else fail "$tool.1: documents every long option" "missing:$miss"; fi
done

# ------------------------------------------- completions are generated, and parse
if sh "$root/scripts/gen-completions.sh" "$HSQ_BIN" "$TMP/gen" >"$TMP/gen.log" 2>&1; then
	if cmp -s "$TMP/gen/hsq.bash" "$bash_c" && cmp -s "$TMP/gen/_hsq" "$zsh_c"; then
		ok "completions/ is what gen-completions.sh makes of these tools"
	else
		fail "completions/ is what gen-completions.sh makes of these tools" \
			"stale: run 'sh scripts/gen-completions.sh build/bin' and commit completions/; $(diff "$bash_c" "$TMP/gen/hsq.bash" 2>&1 | head -n 4 | cut -c 1-160 | tr "\n" " ")"
	fi
else
	fail "gen-completions.sh runs" "$(cat "$TMP/gen.log")"
fi
if command -v bash >/dev/null 2>&1; then
	run bash -n "$bash_c"
	expect "completions/hsq.bash parses (bash -n)" 0
	# The tool list of 'complete' covers every tool.
	miss=
	for tool in $tools; do grep -Eq "^complete -F _hsq( .*)? $tool( |\$)" "$bash_c" || miss="$miss $tool"; done
	if [ -z "$miss" ]; then ok "hsq.bash: complete -F _hsq names every tool"
	else fail "hsq.bash: complete -F _hsq names every tool" "missing:$miss"; fi
fi
if command -v zsh >/dev/null 2>&1; then
	run zsh -n "$zsh_c"
	expect "completions/_hsq parses (zsh -n)" 0
else
	echo "SKIP: zsh -n (zsh not installed)"
fi
miss=
for tool in $tools; do head -n 1 "$zsh_c" | grep -Eq "^#compdef( .*)? $tool( |\$)" || miss="$miss $tool"; done
if [ -z "$miss" ]; then ok "_hsq: #compdef names every tool"
else fail "_hsq: #compdef names every tool" "missing:$miss"; fi

# Values: models complete to *.gguf, snapshots to *.hsq, --mode to the modes.
if command -v bash >/dev/null 2>&1; then
	mkdir -p "$TMP/files/dir"
	: >"$TMP/files/a.gguf"; : >"$TMP/files/b.hsq"; : >"$TMP/files/c.txt"
	complete_in_files() {
		(cd "$TMP/files" && bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _hsq; [ ${#COMPREPLY[@]} -eq 0 ] || printf "%s\n" "${COMPREPLY[@]}"' \
			sh "$bash_c" "$@" 2>&1) | sort | tr '\n' ' '
	}
	check_values() { # NAME WANT WORDS...
		name=$1 want=$2
		shift 2
		got=$(complete_in_files "$@")
		if [ "$got" = "$want" ]; then ok "bash: $name"; else fail "bash: $name" "got '$got', want '$want'"; fi
	}
	case " $tools " in *" hsq-decode "*)
		check_values "hsq-decode -m completes *.gguf" "a.gguf dir " hsq-decode -m ""
		check_values "hsq-decode --model= completes *.gguf" "a.gguf dir " hsq-decode --model = ""
		check_values "hsq-decode -s completes *.hsq" "b.hsq dir " hsq-decode -s ""
		check_values "hsq-decode -p completes nothing" "" hsq-decode -p "" ;;
	esac
	case " $tools " in *" hsq-prefill "*)
		check_values "hsq-prefill --mode completes the modes" "full hsq quant snapkv streaming " hsq-prefill --mode ""
		check_values "hsq-prefill -o completes *.hsq" "b.hsq dir " hsq-prefill -o ""
		check_values "hsq-prefill -f completes any file" "a.gguf b.hsq c.txt dir " hsq-prefill -f "" ;;
	esac
	case " $tools " in *" hsq-inspect "*)
		check_values "hsq-inspect FILE completes *.hsq" "b.hsq dir " hsq-inspect --json "" ;;
	esac
fi

# ------------------------------------------------------------- hsq(7)
page="$root/man/hsq.7"
if [ -f "$page" ]; then
	roff_text "$page" >"$TMP/hsq7"
	miss=
	for tool in $tools; do grep -q -- "$tool" "$TMP/hsq7" || miss="$miss $tool"; done
	if [ -z "$miss" ]; then ok "hsq.7 names every tool"; else fail "hsq.7 names every tool" "missing:$miss"; fi
	roff_text "$page" "EXIT STATUS" >"$TMP/exit7"
	miss=
	for code in $(sed -n 's/^[ \t]*EXIT_[A-Z_]* *= *\([0-9][0-9]*\).*/\1/p' "$root/cmd/common/cli.h"); do
		grep -Eq "^$code\$" "$TMP/exit7" || miss="$miss $code"
	done
	if [ -z "$miss" ]; then ok "hsq.7 EXIT STATUS lists every status of cmd/common/cli.h"
	else fail "hsq.7 EXIT STATUS lists every status of cmd/common/cli.h" "missing:$miss"; fi
else
	fail "man/hsq.7 exists"
fi

finish
