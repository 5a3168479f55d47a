#!/usr/bin/env bash
# Try the .deb on this machine as a person would (root; Debian/Ubuntu; Xvfb, xdotool, xdg-utils and
# ImageMagick's `import`): dpkg -i, start Glassbox from its menu entry's Exec line on a virtual display
# with the checkout's venv out of reach, open a .gguf with xdg-open (the registered MIME type) so it
# lands in the running window, chat, take a screenshot, dpkg -r, and check that nothing is left (files,
# `dpkg -l glassbox` not in "rc" state, no /var/lib/dpkg/info/glassbox.*).
#
#   packaging/try_deb.sh dist/glassbox_0.1.0_amd64.deb MODEL.gguf OUT_DIR [DISPLAY_NUMBER]
set -euo pipefail
deb=$(readlink -f "$1"); model=$(readlink -f "$2"); out=$(readlink -f "$3"); display=":${4:-64}"
app_id=io.github.glassbox.Glassbox
mkdir -p "$out"
home=$(mktemp -d /tmp/glassbox-deb-home.XXXX)
name=$(basename "$model")
cp "$model" "$home/$name"
cd /
say() { echo "[try-deb] $*"; }
# The person's environment: no venv, no PYTHONPATH, nothing of the checkout.
run_as_person() { env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin DISPLAY="$display" \
    XDG_DATA_DIRS=/usr/local/share:/usr/share XDG_RUNTIME_DIR="$home" GLASSBOX_HOME="$home/glassbox" "$@"; }
# In the background: exec, so that $! is Glassbox itself (a backgrounded function is a subshell).
start_as_person() { exec env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin DISPLAY="$display" \
    XDG_DATA_DIRS=/usr/local/share:/usr/share XDG_RUNTIME_DIR="$home" GLASSBOX_HOME="$home/glassbox" "$@"; }

before=$(mktemp); after=$(mktemp)
# The files a package can leave, and dpkg's own record of it: its status line (`dpkg -l`: "rc" when
# config or maintainer scripts stay after `dpkg -r`) and its files under /var/lib/dpkg/info.
snapshot() {
    find /opt /usr/bin /usr/share/applications /usr/share/icons/hicolor /usr/share/mime /usr/share/metainfo \
        /usr/share/doc -xdev 2>/dev/null | sort
    dpkg-query -W -f='dpkg status: ${db:Status-Abbrev} ${Package} ${Version}\n' glassbox 2>/dev/null || true
    ls /var/lib/dpkg/info/glassbox.* 2>/dev/null | sed 's/^/dpkg info: /' || true
}
snapshot > "$before"

dpkg -i "$deb"
say "installed: $(dpkg -s glassbox | grep -E '^(Version|Installed-Size)' | tr '\n' ' ')"
exec_line=$(grep '^Exec=' "/usr/share/applications/$app_id.desktop" | cut -d= -f2- | sed 's/ %f//')
say "menu entry Exec: $exec_line"
say "xdg-mime filetype of $name: $(run_as_person xdg-mime query filetype "$home/$name")"
say "xdg-mime default for application/x-gguf: $(run_as_person xdg-mime query default application/x-gguf)"

Xvfb "$display" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true' EXIT
sleep 2
start_as_person $exec_line > "$home/app.out" 2>&1 &
app=$!
for _ in $(seq 60); do run_as_person xdotool search --onlyvisible --name Glassbox >/dev/null 2>&1 && break; sleep 1; done
say "window up: $(run_as_person xdotool search --onlyvisible --name Glassbox | head -1); processes: $(ps -o pid=,comm= --ppid $app | tr '\n' ' ')"
run_as_person xdg-open "$home/$name"
say "xdg-open returned $?; processes named glassbox-engine: $(pgrep -c -x glassbox-engine || true)"
sleep 8
win=$(run_as_person xdotool search --onlyvisible --name Glassbox | head -1)
eval "$(run_as_person xdotool getwindowgeometry --shell "$win")"
run_as_person xdotool windowfocus --sync "$win"
sleep 1
# The message box (the window opens at 1500x940; it sits 660,757 from the window's corner).
run_as_person xdotool mousemove $((X + 660)) $((Y + 757)) click 1
run_as_person xdotool type --delay 20 "Say hello in one short sentence."
run_as_person xdotool key Return
sleep 15
run_as_person import -window root "$out/deb-xdg-open.png"
ps -eo pid,comm,args | grep -E 'glassbox' | grep -v grep | sed 's/^/[try-deb] ps: /' | cut -c1-160
grep -E 'handed over|second start' "$home/glassbox/data/logs/app.log" | tail -2 | sed 's/^/[try-deb] app.log: /' || true
kill "$app"; wait "$app" 2>/dev/null || true
if pgrep -x glassbox-engine >/dev/null; then say "after closing: a glassbox-engine is still running"; else
    say "after closing (SIGTERM): no glassbox process left"; fi

dpkg -r glassbox
snapshot > "$after"
say "after dpkg -r: $(dpkg -l glassbox 2>&1 | tail -1)"
if diff "$before" "$after" > "$out/deb-leftovers.diff"; then say "dpkg -r: nothing left behind"; else
    say "dpkg -r left or changed:"; cat "$out/deb-leftovers.diff"; fi
rm -rf "$home"
