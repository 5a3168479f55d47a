#!/bin/sh
# Install Glassbox from this tarball for the current user (no root): the app goes to
# ${GLASSBOX_PREFIX:-$HOME/.local/opt/glassbox} (with a copy of this script, for uninstalling),
# the menu entry, icons, the GGUF MIME type and the metainfo to ${XDG_DATA_HOME:-$HOME/.local/share},
# and a `glassbox` link to ~/.local/bin unless a `glassbox` is already there (then it stays, with a warning).
# Every path it adds is listed in the manifest; `install.sh --uninstall` removes exactly those
# (the link only while it is still the one this script made). Chats, settings and downloaded models stay.
set -eu
APP_ID=io.github.glassbox.Glassbox
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${GLASSBOX_PREFIX:-$HOME/.local/opt/glassbox}
SHARE=${XDG_DATA_HOME:-$HOME/.local/share}
BIN=${GLASSBOX_BIN:-$HOME/.local/bin}
MANIFEST="$SHARE/$APP_ID.tarball-install.txt"
SOURCE_MANIFEST="$SHARE/$APP_ID.install.json" # what `packaging/bootstrap.py install` (a source checkout) adds
TAB=$(printf '\t')
# echo, in dash, turns a backslash in a path into an escape: every line goes through printf instead.
say() { printf '%s\n' "$*"; }

refresh() {
    if command -v update-mime-database >/dev/null 2>&1 && [ -d "$SHARE/mime/packages" ]; then
        update-mime-database "$SHARE/mime" >/dev/null 2>&1 || true
    fi
    if command -v update-desktop-database >/dev/null 2>&1 && [ -d "$SHARE/applications" ]; then
        update-desktop-database "$SHARE/applications" >/dev/null 2>&1 || true
    fi
}

# A path as one argument of a .desktop Exec line: in double quotes, with `"`, `` ` ``, `$` and `\` escaped
# (then `\` doubled again, as the file's string escaping wants) and `%` written `%%`.
exec_arg() {
    printf '%s' "$1" | sed -e 's/\\/\\\\\\\\/g' -e 's/["`$]/\\\\&/g' -e 's/%/%%/g' -e 's/^/"/' -e 's/$/"/'
}

# A path as one word for a POSIX shell: in single quotes, a quote inside written '\''.
sh_quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

uninstall() {
    [ -f "$MANIFEST" ] || { say "Glassbox is not installed here (no $MANIFEST)"; return 0; }
    list=$(mktemp)
    mv "$MANIFEST" "$list"
    # The link goes only while it still points at what we installed (someone may have replaced it).
    grep '^l ' "$list" | cut -c3- | while IFS="$TAB" read -r link target; do
        if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then rm -f -- "$link"; else
            say "install.sh: left $link alone: it is no longer the link this script made" >&2; fi
    done
    # Files first; the caches are rebuilt without us, and the ones we created go again after
    # that rebuild; then folders deepest first (only when empty: someone else's files stay).
    grep '^f ' "$list" | cut -c3- | while IFS= read -r p; do rm -f -- "$p"; done
    refresh
    grep '^f ' "$list" | cut -c3- | while IFS= read -r p; do rm -f -- "$p"; done
    grep '^d ' "$list" | cut -c3- | sort -r | while IFS= read -r p; do rmdir -- "$p" 2>/dev/null || true; done
    rm -f -- "$list"
    say "Glassbox removed. Your chats, settings and models stay: ${XDG_DATA_HOME:-$HOME/.local/share}/Glassbox" \
        "(chats, models, logs), ${XDG_CONFIG_HOME:-$HOME/.config}/Glassbox (settings) and" \
        "${XDG_CACHE_HOME:-$HOME/.cache}/Glassbox (cache); delete them yourself to remove those too."
}

if [ "${1:-}" = "--uninstall" ]; then uninstall; exit 0; fi
[ -x "$HERE/glassbox/glassbox" ] || { say "install.sh: $HERE/glassbox/glassbox is missing" >&2; exit 1; }
if [ -f "$SOURCE_MANIFEST" ]; then
    say "install.sh: Glassbox from a source checkout is in your menu already ($SOURCE_MANIFEST);" >&2
    say "  both would write the same menu entry and GGUF type. Remove that one first with" >&2
    say "  'python3 packaging/bootstrap.py uninstall' in the checkout, then run this again." >&2
    exit 1
fi
[ -f "$MANIFEST" ] && uninstall >/dev/null

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Folders that do not exist yet (and their missing parents, e.g. ~/.local) are ours to remove later.
note_missing() {
    d=$1
    while [ ! -d "$d" ]; do say "d $d" >> "$tmp"; d=$(dirname "$d"); done
}
for d in "$PREFIX" "$BIN" "$SHARE" "$SHARE/applications" "$SHARE/mime" "$SHARE/mime/packages" "$SHARE/metainfo" \
         "$SHARE/icons" "$SHARE/icons/hicolor"; do
    note_missing "$d"
done
mkdir -p "$PREFIX" "$BIN" "$SHARE"
cp -a "$HERE/glassbox/." "$PREFIX/"
rm -rf "$PREFIX/share"
# This script goes with the app, so that uninstalling does not need the unpacked tarball.
cp "$0" "$PREFIX/install.sh"
chmod 755 "$PREFIX/install.sh"
# "./x" -> "<kind> $PREFIX/x" (awk reads PREFIX from the environment: no character in it is special).
(cd "$PREFIX" && find . -mindepth 1 -type d) | PREFIX="$PREFIX" awk '{ print "d " ENVIRON["PREFIX"] substr($0, 2) }' >> "$tmp"
(cd "$PREFIX" && find . ! -type d) | PREFIX="$PREFIX" awk '{ print "f " ENVIRON["PREFIX"] substr($0, 2) }' >> "$tmp"
(cd "$HERE/glassbox/share" && find . -mindepth 1 -type d) | while IFS= read -r d; do
    [ -d "$SHARE/$d" ] || say "d $SHARE/${d#./}" >> "$tmp"
done
(cd "$HERE/glassbox/share" && find . -type f) | while IFS= read -r f; do
    mkdir -p "$(dirname "$SHARE/$f")"
    cp "$HERE/glassbox/share/$f" "$SHARE/$f"
    say "f $SHARE/${f#./}" >> "$tmp"
done
# The menu entry starts this copy by its full path: quoted in Exec (a command line: spaces in
# HOME), unquoted in TryExec (a plain string naming the file, where quotes would be part of the name).
entry="$SHARE/applications/$APP_ID.desktop"
try_exec=$(printf '%s' "$PREFIX/glassbox" | sed 's/\\/\\\\/g') # a string value: only `\` is escaped
EXEC_LINE="Exec=$(exec_arg "$PREFIX/glassbox") %f" TRY_LINE="TryExec=$try_exec" \
    awk '/^Exec=/ { print ENVIRON["EXEC_LINE"]; next } /^TryExec=/ { print ENVIRON["TRY_LINE"]; next } { print }' \
    "$entry" > "$entry.new"
mv "$entry.new" "$entry"
link="$BIN/glassbox"
if [ -e "$link" ] || [ -L "$link" ]; then
    say "install.sh: WARNING: $link already exists and is not ours: left as it is." >&2
    say "  Start this Glassbox from the menu or as \"$PREFIX/glassbox\"." >&2
else
    ln -s "$PREFIX/glassbox" "$link"
    printf 'l %s\t%s\n' "$link" "$PREFIX/glassbox" >> "$tmp"
fi
# Caches that did not exist before are ours too.
for c in mime/mime.cache mime/globs mime/globs2 mime/magic mime/aliases mime/subclasses mime/types mime/icons \
         mime/generic-icons mime/treemagic mime/XMLnamespaces mime/version mime/application/x-gguf.xml \
         applications/mimeinfo.cache; do
    [ -e "$SHARE/$c" ] || say "f $SHARE/$c" >> "$tmp"
done
[ -d "$SHARE/mime/application" ] || say "d $SHARE/mime/application" >> "$tmp"
refresh
mv "$tmp" "$MANIFEST"
trap - EXIT
say "Glassbox installed in $PREFIX; it is in your applications menu, and .gguf files open in it."
say "Remove it with: $(sh_quote "$PREFIX/install.sh") --uninstall"
