#!/bin/sh
# Install Glassbox from this tarball for the current user (no root): the app goes to
# ${GLASSBOX_PREFIX:-$HOME/.local/opt/glassbox}, the menu entry, icons, the GGUF MIME type
# and the metainfo to ${XDG_DATA_HOME:-$HOME/.local/share}, a `glassbox` link to ~/.local/bin.
# Every path it adds is listed in the manifest; `./install.sh --uninstall` removes exactly those.
set -eu
APP_ID=io.github.glassbox.Glassbox
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${GLASSBOX_PREFIX:-$HOME/.local/opt/glassbox}
SHARE=${XDG_DATA_HOME:-$HOME/.local/share}
BIN=${GLASSBOX_BIN:-$HOME/.local/bin}
MANIFEST="$SHARE/$APP_ID.tarball-install.txt"

refresh() {
    if command -v update-mime-database >/dev/null 2>&1 && [ -d "$SHARE/mime/packages" ]; then
        update-mime-database "$SHARE/mime" >/dev/null 2>&1 || true
    fi
    if command -v update-desktop-database >/dev/null 2>&1 && [ -d "$SHARE/applications" ]; then
        update-desktop-database "$SHARE/applications" >/dev/null 2>&1 || true
    fi
}

uninstall() {
    [ -f "$MANIFEST" ] || { echo "Glassbox is not installed here (no $MANIFEST)"; exit 0; }
    list=$(mktemp)
    mv "$MANIFEST" "$list"
    # Files first; the caches are rebuilt without us, and the ones we created go again after
    # that rebuild; then folders deepest first (only when empty: someone else's files stay).
    grep '^f ' "$list" | cut -c3- | while IFS= read -r p; do rm -f -- "$p"; done
    refresh
    grep '^f ' "$list" | cut -c3- | while IFS= read -r p; do rm -f -- "$p"; done
    grep '^d ' "$list" | cut -c3- | sort -r | while IFS= read -r p; do rmdir -- "$p" 2>/dev/null || true; done
    rm -f -- "$list"
    echo "Glassbox removed."
}

if [ "${1:-}" = "--uninstall" ]; then uninstall; exit 0; fi
[ -x "$HERE/glassbox/glassbox" ] || { echo "install.sh: $HERE/glassbox/glassbox is missing" >&2; exit 1; }
[ -f "$MANIFEST" ] && uninstall >/dev/null

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Folders that do not exist yet (and their missing parents, e.g. ~/.local) are ours to remove later.
note_missing() {
    d=$1
    while [ ! -d "$d" ]; do echo "d $d" >> "$tmp"; d=$(dirname "$d"); done
}
for d in "$PREFIX" "$BIN" "$SHARE" "$SHARE/applications" "$SHARE/mime" "$SHARE/mime/packages" "$SHARE/metainfo" \
         "$SHARE/icons" "$SHARE/icons/hicolor"; do
    note_missing "$d"
done
mkdir -p "$PREFIX" "$BIN" "$SHARE"
cp -a "$HERE/glassbox/." "$PREFIX/"
rm -rf "$PREFIX/share"
(cd "$PREFIX" && find . -mindepth 1 -type d) | sed "s|^\.|d $PREFIX|" >> "$tmp"
(cd "$PREFIX" && find . ! -type d) | sed "s|^\.|f $PREFIX|" >> "$tmp"
(cd "$HERE/glassbox/share" && find . -mindepth 1 -type d) | while IFS= read -r d; do
    [ -d "$SHARE/$d" ] || echo "d $SHARE/${d#./}" >> "$tmp"
done
(cd "$HERE/glassbox/share" && find . -type f) | while IFS= read -r f; do
    mkdir -p "$(dirname "$SHARE/$f")"
    cp "$HERE/glassbox/share/$f" "$SHARE/$f"
    echo "f $SHARE/${f#./}" >> "$tmp"
done
# The menu entry starts this copy by its full path.
sed -i "s|^Exec=.*|Exec=$PREFIX/glassbox %f|; s|^TryExec=.*|TryExec=$PREFIX/glassbox|" "$SHARE/applications/$APP_ID.desktop"
ln -sf "$PREFIX/glassbox" "$BIN/glassbox"
echo "f $BIN/glassbox" >> "$tmp"
# Caches that did not exist before are ours too.
for c in mime/mime.cache mime/globs mime/globs2 mime/magic mime/aliases mime/subclasses mime/types mime/icons \
         mime/generic-icons mime/treemagic mime/XMLnamespaces mime/version mime/application/x-gguf.xml \
         applications/mimeinfo.cache; do
    [ -e "$SHARE/$c" ] || echo "f $SHARE/$c" >> "$tmp"
done
[ -d "$SHARE/mime/application" ] || echo "d $SHARE/mime/application" >> "$tmp"
refresh
mv "$tmp" "$MANIFEST"
trap - EXIT
echo "Glassbox installed in $PREFIX; it is in your applications menu, and .gguf files open in it."
echo "Remove it with: $0 --uninstall"
