#!/usr/bin/env bash
# Regenerates screenshots/*.png from the real binary: `drover demo` runs in tmux at a
# fixed size, send-keys drive it to each view, `tmux capture-pane -e` keeps the colours,
# a small converter (below) turns each capture into HTML and headless Chromium into a PNG.
#
# Views: the dashboard with its attention line and a hibernated run (dark and light
# terminal palettes), a permission prompt, its rule chooser, a question, a request the
# guard flagged, a held run's route card, a worktree run's diff, the dispatch form with an
# inline refusal and with its model picker, help, budget near the cap, and an 80x24
# terminal. Everything runs in the demo's own throwaway directories (a temp directory per
# run of this script), so no path of the machine that made them shows.
#
# Needs tmux, python3 and chromium; missing Debian packages are installed with apt-get.
# Usage: scripts/screenshots.sh [OUT_DIR]   (default: screenshots/)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-screenshots}"
COLS=120
ROWS=36

need() {
    local cmd="$1" pkg="$2"
    if ! command -v "$cmd" >/dev/null 2>&1; then
        echo "== installing $pkg (for $cmd)"
        local sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$pkg" >/dev/null
    fi
}
need tmux tmux
need python3 python3
need chromium chromium
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] || need fc-list fonts-dejavu-core

echo "== building drover (release)"
cargo build --release --quiet
BIN="$PWD/target/release/drover"

WORK="$(mktemp -d /tmp/drover-demo.XXXXXX)"
# ANSI (tmux capture-pane -e) -> HTML sized to the pane, for the headless browser.
cat >"$WORK/ansi2html.py" <<'PYTHON'
#!/usr/bin/env python3
"""ANSI text (as `tmux capture-pane -e -p` writes it) to a standalone HTML page.

Usage: ansi2html.py [--light] COLS ROWS < pane.ans > pane.html

Only what a terminal shows is kept: SGR colours (the 16 ANSI colours, 256-colour and RGB
forms), bold, dim, italic, underline and reverse. The page is sized to COLS x ROWS cells
of DejaVu Sans Mono so a headless browser can screenshot it at a known size.
"""
import html
import re
import sys

DARK = {
    "bg": "#1d1f21", "fg": "#d8dee9",
    "colors": ["#1d1f21", "#e06c75", "#98c379", "#e5c07b", "#61afef", "#c678dd", "#56b6c2", "#d8dee9",
               "#5c6370", "#ff7b86", "#b5e890", "#ffd68a", "#82c4ff", "#de9cf2", "#7fd3de", "#ffffff"],
}
LIGHT = {
    "bg": "#fafafa", "fg": "#383a42",
    "colors": ["#383a42", "#c8312c", "#3c8a2e", "#a86b00", "#2b63c6", "#9a37ae", "#1f7f8a", "#a0a1a7",
               "#696c77", "#e45649", "#50a14f", "#c18401", "#4078f2", "#a626a4", "#0184bc", "#fafafa"],
}

CELL_W = 8.43   # DejaVu Sans Mono advance at 14px
CELL_H = 17     # line height in px
PAD = 16


def xterm256(n, palette):
    if n < 16:
        return palette["colors"][n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


class State:
    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = None
        self.bg = None
        self.bold = self.dim = self.italic = self.underline = self.reverse = False

    def css(self, palette):
        fg, bg = self.fg, self.bg
        if self.reverse:
            fg, bg = (bg or palette["bg"]), (fg or palette["fg"])
        styles = []
        if fg:
            styles.append("color:%s" % fg)
        if bg:
            styles.append("background:%s" % bg)
        if self.bold:
            styles.append("font-weight:bold")
        if self.dim:
            styles.append("opacity:0.6")
        if self.italic:
            styles.append("font-style:italic")
        if self.underline:
            styles.append("text-decoration:underline")
        return ";".join(styles)


def apply_sgr(state, params, palette):
    codes = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            state.reset()
        elif c == 1:
            state.bold = True
        elif c == 2:
            state.dim = True
        elif c == 3:
            state.italic = True
        elif c == 4:
            state.underline = True
        elif c == 7:
            state.reverse = True
        elif c == 22:
            state.bold = state.dim = False
        elif c == 23:
            state.italic = False
        elif c == 24:
            state.underline = False
        elif c == 27:
            state.reverse = False
        elif 30 <= c <= 37:
            state.fg = palette["colors"][c - 30]
        elif c == 39:
            state.fg = None
        elif 40 <= c <= 47:
            state.bg = palette["colors"][c - 40]
        elif c == 49:
            state.bg = None
        elif 90 <= c <= 97:
            state.fg = palette["colors"][c - 90 + 8]
        elif 100 <= c <= 107:
            state.bg = palette["colors"][c - 100 + 8]
        elif c in (38, 48) and i + 1 < len(codes):
            if codes[i + 1] == 5 and i + 2 < len(codes):
                colour = xterm256(codes[i + 2], palette)
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                colour = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                i += 4
            else:
                colour = None
            if c == 38:
                state.fg = colour
            else:
                state.bg = colour
            i += 1
        i += 1


def convert(text, palette):
    state = State()
    out = []
    token = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])|\x1b\][^\x07]*\x07|([^\x1b]+)")
    for m in token.finditer(text):
        if m.group(3) is not None:
            chunk = html.escape(m.group(3))
            css = state.css(palette)
            out.append('<span style="%s">%s</span>' % (css, chunk) if css else chunk)
        elif m.group(2) == "m":
            apply_sgr(state, m.group(1), palette)
    return "".join(out)


def main():
    args = sys.argv[1:]
    palette = DARK
    if args and args[0] == "--light":
        palette = LIGHT
        args = args[1:]
    cols, rows = int(args[0]), int(args[1])
    text = sys.stdin.read()
    # tmux ends the capture with a newline per row; keep exactly ROWS rows.
    lines = text.split("\n")[:rows]
    body = "\n".join(convert(line, palette) for line in lines)
    width = int(cols * CELL_W + 2 * PAD)
    height = int(rows * CELL_H + 2 * PAD)
    sys.stdout.write("""<!doctype html><html><head><meta charset="utf-8"><style>
html, body { margin: 0; background: %(bg)s; }
pre { margin: 0; padding: %(pad)dpx; color: %(fg)s; background: %(bg)s;
      font-family: 'DejaVu Sans Mono', monospace; font-size: 14px; line-height: %(lh)dpx;
      width: %(w)dpx; height: %(h)dpx; box-sizing: border-box; white-space: pre; overflow: hidden; }
</style></head><body><pre>%(body)s</pre></body></html>
""" % {"bg": palette["bg"], "fg": palette["fg"], "pad": PAD, "lh": CELL_H, "w": width, "h": height, "body": body})
    sys.stderr.write("%dx%d\n" % (width, height))


if __name__ == "__main__":
    main()
PYTHON
SOCKET="drover-shots-$$"
tmux_() { tmux -L "$SOCKET" "$@"; }
cleanup() {
    tmux_ kill-server >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT"

# Waits (at most 30 s) until session $1's pane shows $2; sends keys $3… every second.
wait_for() {
    local session="$1" text="$2"
    shift 2
    local tries=0
    until tmux_ capture-pane -p -t "$session" | grep -qF -- "$text"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 300 ]; then
            echo "timed out waiting for '$text' in $session; the pane:" >&2
            tmux_ capture-pane -p -t "$session" >&2
            exit 1
        fi
        if [ $# -gt 0 ] && [ $((tries % 10)) -eq 0 ]; then
            tmux_ send-keys -t "$session" "$@"
        fi
        sleep 0.1
    done
}

# shot SESSION NAME [--light]: the pane as $OUT/NAME.png
shot() {
    local session="$1" name="$2" light="${3:-}"
    local size cols rows
    size="$(tmux_ display-message -p -t "$session" '#{window_width} #{window_height}')"
    cols="${size% *}"
    rows="${size#* }"
    # Let a frame with the latest state land before capturing.
    sleep 0.3
    tmux_ capture-pane -e -p -t "$session" >"$WORK/$name.ans"
    local dims
    dims="$(python3 "$WORK/ansi2html.py" $light "$cols" "$rows" <"$WORK/$name.ans" 2>&1 >"$WORK/$name.html")"
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size="${dims%x*},${dims#*x}" \
        --screenshot="$OUT/$name.png" "file://$WORK/$name.html" >/dev/null 2>&1
    echo "   $OUT/$name.png (${cols}x${rows})"
}

echo "== demo in tmux (${COLS}x${ROWS})"
HOME_A="$WORK/home"
mkdir -p "$HOME_A"
# The demo's own config (assets/demo.toml), with idle runs hibernating within seconds so
# the trays show one.
python3 - "$HOME_A/config.toml" <<'PYTHON'
import json, sys, tomllib

config = tomllib.load(open("assets/demo.toml", "rb"))["config"]
config.setdefault("limits", {})["hibernate_after_secs"] = 3


def emit(table, prefix, out):
    if prefix:
        out.append("[%s]" % prefix)
    for key, value in table.items():
        if not isinstance(value, dict):
            out.append("%s = %s" % (key, json.dumps(value)))
    for key, value in table.items():
        if isinstance(value, dict):
            emit(value, "%s.%s" % (prefix, key) if prefix else key, out)


lines = []
emit(config, "", lines)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PYTHON
# Started in the throwaway directory: the form's directory is the demo's, not this one.
tmux_ new-session -d -s demo -x "$COLS" -y "$ROWS" -c "$HOME_A" "DROVER_HOME='$HOME_A' '$BIN' demo"
da() { DROVER_HOME="$HOME_A" "$BIN" "$@"; }

# A run whose request the guard flags (a forced push), in the demo's own repository.
wait_for demo "Needs you"
PROJECT="$(find "$HOME_A/demo" -mindepth 1 -maxdepth 1 -type d -name 'greeter-*' | head -n 1)"
cat >"$WORK/force-push.toml" <<'TOML'
description = "Asks to force-push the branch it worked on."
model = "claude-sonnet-4-5"

[[turns]]
status = "done"
summary = "Published the branch."

[[turns.steps]]
text = "The branch is ready; I'll publish it."

[[turns.steps]]
tool = "Bash"
input = { command = "git push --force origin main", description = "Publish the branch" }
needs_permission = true
run = false
output = "done"
on_deny = "Understood, I did not push."
TOML
da dispatch --provider sim --scenario "$WORK/force-push.toml" --cwd "$PROJECT" \
    --title "Publish the release branch" "Publish the release branch to origin" >/dev/null

# Trays: the slow spender moves the gauge past the warning within seconds; the runs that
# finished their turn hibernate; the attention line shows the oldest request.
wait_for demo "warning reached"
wait_for demo "hibernated"
wait_for demo " ▶ "
shot demo dashboard
shot demo dashboard-light --light

# The oldest request of any run in full; tab walks the queue.
tmux_ send-keys -t demo p
wait_for demo "Bash wants to run" Tab
shot demo permission
# `a`: the rule chooser for it (after a look: a key answers only what was on screen).
sleep 0.7
tmux_ send-keys -t demo a
wait_for demo "Save a rule and answer this request with it"
shot demo rule-chooser
tmux_ send-keys -t demo Escape
wait_for demo "Question ·" Tab
shot demo question
wait_for demo "flagged:" Tab
shot demo flagged
wait_for demo "Route card ·" Tab
shot demo route-card
tmux_ send-keys -t demo Escape
wait_for demo "? help" Escape

# A worktree run's diff: filter down to it, then `D`.
tmux_ send-keys -t demo / "cache in front of the greeting" Enter
wait_for demo "filter: cache in front of the greeting"
tmux_ send-keys -t demo D
wait_for demo "Diff ·"
wait_for demo "@@"
shot demo diff
tmux_ send-keys -t demo Escape
tmux_ send-keys -t demo Escape
wait_for demo "? help"

# The dispatch form, refused inline: a model the catalog does not know.
tmux_ send-keys -t demo n
wait_for demo "New dispatch"
tmux_ send-keys -t demo "Add a health check endpoint to the API" Tab Tab "sonnet-9" Enter
wait_for demo "MODEL_UNKNOWN"
shot demo dispatch-form
tmux_ send-keys -t demo Escape
# The form's model picker: the provider's models from the catalog, with their prices.
tmux_ send-keys -t demo n
wait_for demo "New dispatch"
tmux_ send-keys -t demo "Add a health check endpoint to the API" Tab Tab Right Right
wait_for demo "per Mtok"
shot demo model-picker
tmux_ send-keys -t demo Escape

tmux_ send-keys -t demo '?'
wait_for demo "show this help"
shot demo help
tmux_ send-keys -t demo Escape

tmux_ resize-window -t demo -x 80 -y 24
wait_for demo "? help"
shot demo narrow-80x24

echo "== budget near the cap (a second demo with a small session cap)"
HOME_B="$WORK/home-budget"
mkdir -p "$HOME_B"
cat >"$HOME_B/config.toml" <<'TOML'
[limits]
session_warning_usd = 1.0
session_hard_cap_usd = 2.5
[limits.per_provider]
sim = 5
TOML
tmux_ new-session -d -s budget -x "$COLS" -y "$ROWS" -c "$HOME_B" "DROVER_HOME='$HOME_B' '$BIN' demo --no-runs"
wait_for budget "No runs yet"
db() { DROVER_HOME="$HOME_B" "$BIN" "$@"; }
# In the demo's own repository, never in this checkout.
PROJECT_B="$(find "$HOME_B/demo" -mindepth 1 -maxdepth 1 -type d -name 'greeter-*' | head -n 1)"
run="$(db dispatch --provider sim --scenario slow-spender --budget 2 --cwd "$PROJECT_B" \
    --title "Refactor the twenty storage modules" \
    --json "Refactor the twenty storage modules to the new error type" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])')"
db wait "$run" --until idle --timeout 30 >/dev/null
db follow-up "$run" "Go on with the second pass" >/dev/null
db wait "$run" --until idle --timeout 30 >/dev/null || true
db dispatch --provider sim --scenario hang --cwd "$PROJECT_B" --title "Investigate the flaky integration test" \
    "Find out why the integration test fails one run in twenty" >/dev/null
wait_for budget "Running (1)"
shot budget budget-near-cap

echo "== done"
