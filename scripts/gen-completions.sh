#!/bin/sh
# gen-completions.sh BINDIR [OUTDIR] - write the bash and zsh completions of
# the hsq tools (OUTDIR/hsq.bash and OUTDIR/_hsq; OUTDIR defaults to the
# tree's completions/) from the tools' own option tables.
#
# For every executable BINDIR/hsq-* it runs `TOOL --dump-options` (the hidden
# option of the tools built on cmd/common/cli.c: one "--long<TAB>-s<TAB>ARG" line per
# option) and `TOOL --help` (descriptions, the usage line). A tool without
# --dump-options (plain getopt_long) is described from its --help alone.
# Subcommands (a lowercase word after the tool's name in a usage line, or the
# names under a "commands:" heading of --help) are described the same way
# from `TOOL SUB --dump-options` and `TOOL SUB --help`.
#
# What an option's value completes to is derived, not listed by hand:
#   - a literal lowercase value in the usage line ("--mode full", "--x a|b")
#     or a list in the help text ("one of a, b, c", "{a,b,c}"): those words;
#   - a comma-separated LIST whose help names the items ("codecs: a,b,c"):
#     those words, several of them separated by commas;
#   - an argument placeholder with an extension in the usage line
#     ("-o OUT.hsq"): files with that extension;
#   - MODEL (usage) or --model: *.gguf; SNAPSHOT (usage) or --snapshot: *.hsq;
#   - FILE/PATH/...: any file; DIR: directories; anything else: no completion.
# Positional words of the usage line complete the same way (FILE.hsq: *.hsq;
# CORPUS...: any file; TEXT, N: nothing).
#
# The output is deterministic (tools sorted by name), so tests/cli/docs.sh
# regenerates it and diffs it against the committed files.
set -eu

bindir=${1:?usage: gen-completions.sh BINDIR [OUTDIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
outdir=${2:-$here/completions}
[ -d "$bindir" ] || { echo "gen-completions: $bindir is not a directory; build the tools first (make all)" >&2; exit 1; }
mkdir -p "$outdir"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hsq-gencomp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
TAB=$(printf '\t')

# describe TOOL SUB CMD...: appends the records of one (sub)command to
# $tmp/table. Records (tab-separated):
#   O tool sub long short arg kind help   an option ("-" for a missing field)
#   P tool sub kind placeholder           a positional argument
#   S tool sub-name description           a subcommand of tool
describe() {
	tool=$1 sub=$2
	shift 2
	if ! "$@" --help >"$tmp/help" 2>/dev/null </dev/null; then
		echo "gen-completions: '$*' --help failed" >&2
		return 1
	fi
	: >"$tmp/dump"
	if "$@" --dump-options >"$tmp/dump.raw" 2>/dev/null </dev/null &&
		[ -s "$tmp/dump.raw" ] &&
		! grep -Ev "^--[A-Za-z0-9][-A-Za-z0-9_]*${TAB}(-[A-Za-z0-9]| )?${TAB}[^${TAB}]*\$" "$tmp/dump.raw" >/dev/null; then
		cp "$tmp/dump.raw" "$tmp/dump"
	fi
	awk -v tool="$tool" -v sub_="$sub" -f "$tmp/describe.awk" "$tmp/help" "$tmp/dump" >>"$tmp/table"
}

cat >"$tmp/describe.awk" <<'AWK'
# First file: --help output; second: --dump-options output (maybe empty).
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function clean(s) { gsub(/\t/, " ", s); return s == "" ? "-" : s }
FNR == 1 { nfile++ }
nfile == 1 {
	line = $0
	if (line ~ /^[ \t]*([Uu]sage|or):[ \t]/) {
		sub(/^[ \t]*([Uu]sage|or):[ \t]+/, "", line)
		usage[++n_usage] = trim(line)
		next
	}
	if (line ~ /^[A-Za-z][A-Za-z ]*:[ \t]*$/) {  # a heading: "options:", "commands:"
		heading = tolower(line)
		next
	}
	if (line ~ /^[ \t]*$/) { if (heading ~ /command/) heading = ""; next }
	if (heading ~ /command/ && line ~ /^[ \t]+[a-z][-a-z0-9]*([ \t]|$)/) {
		l = trim(line); name = l; sub(/[ \t].*/, "", name)
		d = l; sub(/^[^ \t]+[ \t]*/, "", d)
		if (!(name in subdesc)) { subs[++n_subs] = name; subdesc[name] = d }
		next
	}
	# An option line: "-m, --model FILE   text", "    --temp T   text",
	# "--model=FILE text", "-x ARG  text".
	l = trim(line)
	if (l !~ /^-/) next
	short = "-"; long = "-"; arg = "-"
	if (match(l, /^-[A-Za-z0-9](, |,)/)) { short = substr(l, 1, 2); l = substr(l, RLENGTH + 1) }
	if (match(l, /^--[A-Za-z0-9][-A-Za-z0-9_]*/)) { long = substr(l, 3, RLENGTH - 2); l = substr(l, RLENGTH + 1) }
	else if (short == "-" && match(l, /^-[A-Za-z0-9]/)) { short = substr(l, 1, 2); l = substr(l, 3) }
	else next
	if (match(l, /^(\[=|=| )[A-Z][A-Za-z0-9_.|<>-]*\]?/)) {
		a = substr(l, 1, RLENGTH); l = substr(l, RLENGTH + 1)
		gsub(/[][=< >]/, "", a); arg = a
	}
	if (l != "" && l !~ /^[ \t]/) next
	d = trim(l)
	key = long != "-" ? long : short
	if (!(key in hdesc)) { hkeys[++n_h] = key; hdesc[key] = d; hshort[key] = short; harg[key] = arg }
	next
}
nfile == 2 {
	n = split($0, f, "\t")
	long = substr(f[1], 3); short = trim(f[2]); arg = n >= 3 ? trim(f[3]) : ""
	dkeys[++n_d] = long; dshort[long] = short == "" ? "-" : short; darg[long] = arg == "" ? "-" : arg
	next
}
# What a value completes to: gguf, hsq, ext:X, file, dir, words:a|b, none.
function kind_of(long, short, arg, desc,    ph, k, m, w) {
	ph = ""
	if (short != "-" && (short in placeholder)) ph = placeholder[short]
	if (long != "-" && (("--" long) in placeholder)) ph = placeholder["--" long]
	if (ph ~ /^[a-z0-9][-a-z0-9_.|]*$/) { w = ph; gsub(/\|/, " ", w); return "words:" w }
	if (match(desc, /: [a-z0-9][-a-z0-9_]*(,[a-z0-9][-a-z0-9_]*)+/) && (arg ~ /LIST/ || desc ~ /comma/)) {
		w = substr(desc, RSTART + 2, RLENGTH - 2); gsub(/,/, " ", w); return "list:" w
	}
	if (match(desc, /one of:? [a-z0-9][-a-z0-9_]*(, [a-z0-9][-a-z0-9_]*)*(,? or [a-z0-9][-a-z0-9_]*)?/)) {
		w = substr(desc, RSTART, RLENGTH); sub(/^one of:? /, "", w); gsub(/,? or |, /, " ", w); return "words:" w
	}
	if (match(desc, /\{[a-z0-9][-a-z0-9_]*(,[a-z0-9][-a-z0-9_]*)+\}/)) {
		w = substr(desc, RSTART + 1, RLENGTH - 2); gsub(/,/, " ", w); return "words:" w
	}
	return kind_of_word(ph != "" ? ph : arg, long)
}
function kind_of_word(w, long,    e) {
	if (w ~ /\.[A-Za-z0-9]+$/) { e = w; sub(/.*\./, "", e); return e == "gguf" ? "gguf" : e == "hsq" ? "hsq" : "ext:" e }
	if (w == "MODEL" || (long == "model" && w ~ /FILE|PATH|MODEL/)) return "gguf"
	if (w == "SNAPSHOT" || (long == "snapshot" && w ~ /FILE|PATH/)) return "hsq"
	if (w ~ /^(DIR|DIRECTORY)$/ || w ~ /DIR$/) return "dir"
	if (w ~ /FILE|PATH/) return "file"
	return "none"
}
END {
	# Options: the dump's table when there is one, else --help's.
	if (n_d) {
		for (i = 1; i <= n_d; i++) {
			k = dkeys[i]; okey[i] = k; oshort[k] = dshort[k]; oarg[k] = darg[k]
			odesc[k] = (k in hdesc) ? hdesc[k] : "-"
		}
		n_o = n_d
	} else {
		for (i = 1; i <= n_h; i++) {
			k = hkeys[i]; okey[i] = k; oshort[k] = hshort[k]; oarg[k] = harg[k]; odesc[k] = hdesc[k]
		}
		n_o = n_h
	}
	for (i = 1; i <= n_o; i++) {
		k = okey[i]
		islong[k] = k ~ /^-/ ? 0 : 1
		if (oshort[k] != "-") takes[oshort[k]] = oarg[k] != "-"
		if (islong[k]) takes["--" k] = oarg[k] != "-"
	}
	# The usage lines: value placeholders, positionals, subcommands.
	for (u = 1; u <= n_usage; u++) {
		s = usage[u]
		gsub(/[][()]/, " ", s)
		nt = split(s, t, /[ \t]+/)
		first = 1
		for (j = 1; j <= nt; j++) {
			w = t[j]
			if (w == "" || w == "|" || w == "..." || w == "options" || w == "[options]") continue
			if (first) { first = 0; if (w == tool || w ~ ("/" tool "$")) continue }
			if (w == "<" || w == ">") { j++; continue }
			if (w ~ /^-/) {
				o = w; v = ""
				if (index(o, "=")) { v = substr(o, index(o, "=") + 1); o = substr(o, 1, index(o, "=") - 1) }
				if ((o in takes) && takes[o]) {
					if (v == "" && j < nt) v = t[++j]
					if (v != "" && !(o in placeholder)) placeholder[o] = v
				}
				continue
			}
			if (sub_ == "" && w ~ /^[a-z][-a-z0-9]*$/ && j == 2) {
				if (!(w in subdesc)) { subs[++n_subs] = w; subdesc[w] = "" }
				continue
			}
			if (sub_ != "" && w == sub_) continue
			if (w ~ /^[A-Z]/ && !(w in seenpos)) { seenpos[w] = 1; pos[++n_pos] = w }
		}
	}
	for (i = 1; i <= n_o; i++) {
		k = okey[i]
		long = islong[k] ? k : "-"
		short = islong[k] ? oshort[k] : k
		kind = oarg[k] == "-" ? "-" : kind_of(long, short, oarg[k], odesc[k])
		printf "O\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tool, clean(sub_), long, short, oarg[k], kind, clean(odesc[k])
	}
	# A dispatcher's positional is its subcommand, completed from the S records.
	if (sub_ == "" && n_subs) n_pos = 0
	for (i = 1; i <= n_pos; i++) {
		w = pos[i]; sub(/\.\.\.$/, "", w)
		k = kind_of_word(w, "")
		# Positionals are files unless their name says otherwise.
		if (k == "none" && w !~ /^(TEXT|STRING|WORD|N|NUM|NUMBER|COUNT|COMMAND|SUBCOMMAND|NAME)$/) k = "file"
		printf "P\t%s\t%s\t%s\t%s\n", tool, clean(sub_), k, pos[i]
	}
	if (sub_ == "")
		for (i = 1; i <= n_subs; i++)
			printf "S\t%s\t%s\t%s\n", tool, subs[i], clean(subdesc[subs[i]])
}
AWK

: >"$tmp/table"
tools=
for path in "$bindir"/hsq-*; do
	[ -f "$path" ] && [ -x "$path" ] || continue
	tools="$tools ${path##*/}"
done
tools=$(printf '%s\n' $tools | sort)
[ -n "$tools" ] || { echo "gen-completions: no hsq-* tools in $bindir; build them first (make all)" >&2; exit 1; }
for tool in $tools; do
	describe "$tool" "" "$bindir/$tool"
	for s in $(awk -F'\t' -v t="$tool" '$1 == "S" && $2 == t { print $3 }' "$tmp/table"); do
		# A subcommand without a --help of its own keeps no options.
		describe "$tool" "$s" "$bindir/$tool" "$s" || true
	done
done
tools_line=$(printf '%s ' $tools)
tools_line=${tools_line% }

# ------------------------------------------------------------------- bash
awk -F'\t' -v tools="$tools_line" '
function q(s) { gsub(/\047/, "\047\\\047\047", s); return "\047" s "\047" }
$1 == "O" {
	key = $2 ($3 == "-" ? "" : " " $3)
	if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
	if ($4 != "-") { opts[key] = opts[key] " --" $4; if ($6 != "-") args[key] = args[key] " --" $4 "=" $7 }
	if ($5 != "-") { opts[key] = opts[key] " " $5; if ($6 != "-") args[key] = args[key] " " $5 "=" $7 }
}
$1 == "P" { key = $2 ($3 == "-" ? "" : " " $3); if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
	if (!(key in pos)) pos[key] = $4 }
$1 == "S" { subs[$2] = subs[$2] " " $3; if (!($2 in seen)) { seen[$2] = 1; keys[++n] = $2 } }
END {
	print "# hsq.bash - bash completion for the hsq tools: " tools "."
	print "# Generated by scripts/gen-completions.sh from the tools\047 option tables"
	print "# (--dump-options, --help); do not edit: run"
	print "#     sh scripts/gen-completions.sh build/bin"
	print "# Use: source this file, or install it as"
	print "# /usr/share/bash-completion/completions/<tool> for each tool (make install)."
	print ""
	print "# _hsq_table TOOL [SUB]: sets _hsq_opts (every option), _hsq_args (\"opt=kind\""
	print "# for options that take a value), _hsq_pos (what positionals complete to)"
	print "# and _hsq_subs (subcommands). Kinds: gguf, hsq, ext:X, file, dir,"
	print "# words:a,b (one of the values), list:a,b (several, comma-separated), none."
	print "_hsq_table() {"
	print "\t_hsq_opts= _hsq_args= _hsq_pos=none _hsq_subs="
	print "\tcase \"$*\" in"
	for (i = 1; i <= n; i++) {
		k = keys[i]
		line = "\t" q(k) ")"
		if (k in opts) line = line " _hsq_opts=" q(substr(opts[k], 2)) ";"
		if (k in args) line = line " _hsq_args=" q(fixargs(args[k])) ";"
		if (k in pos) line = line " _hsq_pos=" pos[k] ";"
		if (k in subs) line = line " _hsq_subs=" q(substr(subs[k], 2)) ";"
		sub(/;$/, "", line); print line " ;;"
	}
	print "\tesac"
	print "}"
}
# args are " --opt=kind ..." where a words: kind may hold spaces; turn the
# spaces inside a words: list into commas.
function fixargs(s,    r, w, i, nw, cur) {
	nw = split(substr(s, 2), w, " ")
	r = ""
	for (i = 1; i <= nw; i++) {
		if (w[i] ~ /^-/) r = r (r == "" ? "" : " ") w[i]
		else r = r "," w[i]
	}
	return r
}
' "$tmp/table" >"$tmp/hsq.bash"

cat >>"$tmp/hsq.bash" <<'BASH'

# _hsq_files [EXT]: files (with extension EXT) and directories.
_hsq_files() {
	compopt -o filenames 2>/dev/null
	if declare -F _filedir >/dev/null 2>&1; then
		_filedir ${1:+"$1"}
		return
	fi
	local IFS=$'\n'
	if [[ -n ${1:-} ]]; then
		COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X "!*.$1" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}

# _hsq_value KIND: completes the value of an option or a positional.
_hsq_value() {
	case $1 in
	gguf | hsq) _hsq_files "$1" ;;
	ext:*) _hsq_files "${1#ext:}" ;;
	file) _hsq_files ;;
	dir)
		compopt -o filenames 2>/dev/null
		local IFS=$'\n'
		COMPREPLY=($(compgen -d -- "$cur"))
		;;
	words:*)
		local w=${1#words:}
		COMPREPLY=($(compgen -W "${w//,/ }" -- "$cur"))
		;;
	list:*)
		local w=${1#list:} done=
		[[ $cur == *,* ]] && done=${cur%,*},
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -P "$done" -W "${w//,/ }" -- "${cur##*,}"))
		;;
	*) COMPREPLY=() ;;
	esac
}

_hsq() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev= tool=${COMP_WORDS[0]##*/} sub= i w kind
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	# "--model=fo" arrives as "--model" "=" "fo" (= is a word break).
	if [[ $cur == = ]]; then
		cur=
	elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	fi
	_hsq_table "$tool"
	if [[ -z $_hsq_opts && -z $_hsq_subs ]]; then
		_hsq_files # a tool newer than this file: files at least
		return 0
	fi
	if [[ -n $_hsq_subs ]]; then
		for ((i = 1; i < COMP_CWORD; i++)); do
			for w in $_hsq_subs; do
				if [[ ${COMP_WORDS[i]} == "$w" ]]; then sub=$w; break 2; fi
			done
		done
		if [[ -n $sub ]]; then
			_hsq_table "$tool" "$sub"
		elif [[ $cur != -* && " $_hsq_args " != *" $prev="* ]]; then
			COMPREPLY=($(compgen -W "$_hsq_subs" -- "$cur"))
			return 0
		fi
	fi
	for w in $_hsq_args; do
		if [[ $prev == "${w%%=*}" ]]; then
			_hsq_value "${w#*=}"
			return 0
		fi
	done
	if [[ $cur == -* || $_hsq_pos == none ]]; then
		COMPREPLY=($(compgen -W "$_hsq_opts" -- "$cur"))
		return 0
	fi
	_hsq_value "$_hsq_pos"
	return 0
}

BASH
printf 'complete -F _hsq %s\n' "$tools_line" >>"$tmp/hsq.bash"

# -------------------------------------------------------------------- zsh
awk -F'\t' -v tools="$tools_line" '
function sq(s) { gsub(/\047/, "\047\\\047\047", s); return s }
function bracket(s) { gsub(/\\/, "\\\\", s); gsub(/\[/, "\\[", s); gsub(/\]/, "\\]", s); gsub(/:/, "\\:", s); return sq(s) }
function msg(s) { gsub(/\\/, "\\\\", s); gsub(/:/, "\\:", s); return sq(s) }
function action(kind,    w) {
	if (kind == "gguf" || kind == "hsq") return "_files -g \"*." kind "(-.)\""
	if (kind ~ /^ext:/) return "_files -g \"*." substr(kind, 5) "(-.)\""
	if (kind == "file") return "_files"
	if (kind == "dir") return "_files -/"
	if (kind ~ /^words:/) { w = substr(kind, 7); return "(" w ")" }
	if (kind ~ /^list:/) { w = substr(kind, 6); return "_values -s , item " w }
	return " "
}
function fname(key) { gsub(/[^A-Za-z0-9]+/, "_", key); return "_" key }
$1 == "O" {
	key = $2 ($3 == "-" ? "" : " " $3)
	if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
	long = $4; short = $5; arg = $6; kind = $7; d = $8 == "-" ? "" : $8
	excl = ""
	if (long == "help" || long == "version") excl = "(- *)"
	else if (long != "-" && short != "-") excl = "(" short " --" long ")"
	if (long != "-" && short != "-")
		names = "{" short (arg != "-" ? "+" : "") ",--" long (arg != "-" ? "=" : "") "}"
	else if (long != "-")
		names = "--" long (arg != "-" ? "=" : "")
	else
		names = short (arg != "-" ? "+" : "")
	rest = "[" bracket(d) "]"
	if (arg != "-") rest = rest ":" msg(arg) ":" sq(action(kind))
	if (names ~ /^\{/)
		spec = (excl != "" ? "\047" excl "\047" : "") names "\047" rest "\047"
	else
		spec = "\047" excl names rest "\047"
	specs[key] = specs[key] " \\\n\t\t" spec
}
$1 == "P" {
	key = $2 ($3 == "-" ? "" : " " $3)
	if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
	w = $5; rep = w ~ /\.\.\.$/ ? "*" : ++npos[key]
	specs[key] = specs[key] " \\\n\t\t\047" rep ":" msg(w) ":" sq(action($4)) "\047"
}
$1 == "S" { subs[$2] = subs[$2] " " $3; sdesc[$2, $3] = $4 == "-" ? "" : $4; nsub[$2]++; sname[$2, nsub[$2]] = $3
	if (!($2 in seen)) { seen[$2] = 1; keys[++n] = $2 } }
END {
	print "#compdef " tools
	print "# _hsq - zsh completion for the hsq tools."
	print "# Generated by scripts/gen-completions.sh from the tools\047 option tables"
	print "# (--dump-options, --help); do not edit: run"
	print "#     sh scripts/gen-completions.sh build/bin"
	print "# Use: put this file in a directory of $fpath (make install uses"
	print "# PREFIX/share/zsh/site-functions), or source it after compinit."
	for (i = 1; i <= n; i++) {
		k = keys[i]
		if (index(k, " ")) continue
		print ""
		print fname(k) "() {"
		if (k in subs) {
			print "\tlocal curcontext=$curcontext state state_descr line"
			print "\ttypeset -A opt_args"
			line = "\t_arguments -C -s -S :" specs[k] " \\\n\t\t\0471:command:((" 
			for (j = 1; j <= nsub[k]; j++) {
				s = sname[k, j]
				line = line (j > 1 ? " " : "") s "\\:" msg("\"" sdesc[k, s] "\"")
			}
			print line "))\047 \\\n\t\t\047*::argument:->sub\047 && return"
			print "\tcase $state in"
			print "\tsub)"
			print "\t\tcurcontext=${curcontext%:*:*}:" k "-$line[1]:"
			print "\t\tcase $line[1] in"
			for (j = 1; j <= nsub[k]; j++) {
				s = sname[k, j]
				print "\t\t" s ") " fname(k " " s) " ;;"
			}
			print "\t\tesac"
			print "\t\t;;"
			print "\tesac"
		} else {
			print "\t_arguments -s -S :" specs[k]
		}
		print "}"
		for (j = 1; j <= nsub[k]; j++) {
			s = sname[k, j]; sk = k " " s
			print ""
			print fname(sk) "() {"
			print "\t_arguments -s -S :" specs[sk]
			print "}"
		}
	}
	print ""
	print "_hsq() {"
	print "\tcase $service in"
	for (i = 1; i <= n; i++) {
		k = keys[i]
		if (index(k, " ")) continue
		print "\t" k ") " fname(k) " \"$@\" ;;"
	}
	print "\tesac"
	print "}"
	print ""
	print "if [ \"$funcstack[1]\" = _hsq ]; then"
	print "\t_hsq \"$@\""
	print "else"
	print "\tcompdef _hsq " tools
	print "fi"
}
' "$tmp/table" >"$tmp/_hsq"

mv "$tmp/hsq.bash" "$outdir/hsq.bash"
mv "$tmp/_hsq" "$outdir/_hsq"
echo "gen-completions: wrote $outdir/hsq.bash and $outdir/_hsq for $tools_line"
