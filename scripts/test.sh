#!/usr/bin/env bash
# The one test command (README): installs the pinned provider CLIs the conformance tests
# run (tests/peers, `npm ci`), then builds drover and runs every test where only loopback
# exists.
set -euo pipefail
cd "$(dirname "$0")/.."

peers=tests/peers
need_node() {
    echo "error: $1" >&2
    echo "The conformance tests run the real provider CLIs (Claude Code, Codex, OpenCode)," >&2
    echo "installed from the npm registry with npm. Install Node.js 18 or newer with npm" >&2
    echo "(e.g. apt-get install nodejs npm, or https://nodejs.org), then run scripts/test.sh again." >&2
    exit 1
}
command -v node >/dev/null 2>&1 || need_node "node (Node.js) is not on PATH"
command -v npm >/dev/null 2>&1 || need_node "npm is not on PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 18 ]; then
    need_node "Node.js $(node --version 2>/dev/null || echo '?') is too old"
fi

# The dashboard's end-to-end tests run the real binary in tmux.
if ! command -v tmux >/dev/null 2>&1; then
    echo "error: tmux is not on PATH; the dashboard's end-to-end tests drive drover in tmux." >&2
    echo "Install it (e.g. apt-get install tmux), then run scripts/test.sh again." >&2
    exit 1
fi

# The sandbox's tests run real bubblewrap (as root; as another user they say why and
# return).
if [ "$(id -u)" = 0 ] && ! command -v bwrap >/dev/null 2>&1; then
    echo "error: bwrap is not on PATH; the sandbox's tests run real bubblewrap." >&2
    echo "Install it (e.g. apt-get install bubblewrap), then run scripts/test.sh again." >&2
    exit 1
fi

# `npm ci` reinstalls from the lockfile; skip it when node_modules is newer than both
# manifests (npm writes node_modules/.package-lock.json last) and every CLI is there.
installed="$peers/node_modules/.package-lock.json"
if [ -f "$installed" ] && [ "$installed" -nt "$peers/package.json" ] &&
    [ "$installed" -nt "$peers/package-lock.json" ] &&
    [ -x "$peers/node_modules/.bin/claude" ] && [ -x "$peers/node_modules/.bin/codex" ] &&
    [ -x "$peers/node_modules/.bin/opencode" ] && [ -x "$peers/node_modules/.bin/mcp-inspector" ] &&
    [ -x "$peers/node_modules/.bin/claude-agent-acp" ] && [ -x "$peers/node_modules/.bin/codex-acp" ] &&
    [ -x "$peers/node_modules/.bin/gemini" ]; then
    echo "tests/peers: the pinned provider CLIs are installed (npm ci skipped)"
else
    echo "tests/peers: installing the pinned provider CLIs (npm ci)"
    (cd "$peers" && npm ci --no-audit --no-fund)
fi

# Built first, with the network (cargo may fetch crates); then run where only loopback
# exists: a network namespace of their own with `lo` up, so nothing the real CLIs start
# reaches past 127.0.0.1 whatever their flags say (tests/peers/README.md, "Loopback
# only"; the tests that start a CLI fail anywhere else). `unshare -n` needs root;
# DROVER_TEST_NETWORK=host accepts running with the machine's network where it is denied.
cargo test --workspace --all-features --no-run "$@"
# --no-fail-fast: a failing target does not hide the results of the ones after it.
tests=(cargo test --workspace --all-features --offline --no-fail-fast "$@")
if unshare -n true 2>/dev/null; then
    if ! command -v ip >/dev/null 2>&1; then
        echo "error: ip (iproute2) is not on PATH; the tests run in a network namespace whose" >&2
        echo "loopback it brings up. Install it (e.g. apt-get install iproute2), then run" >&2
        echo "scripts/test.sh again." >&2
        exit 1
    fi
    echo "tests: in a network namespace of their own, only loopback up (unshare -n)"
    exec unshare -n -- sh -c 'ip link set lo up && exec "$@"' sh "${tests[@]}"
elif [ "${DROVER_TEST_NETWORK:-}" = host ]; then
    echo "tests: DROVER_TEST_NETWORK=host, with this machine's network (unshare -n is denied here)"
    exec "${tests[@]}"
else
    echo "error: cannot make a network namespace for the tests (unshare -n needs root)." >&2
    echo "The tests that start the real CLIs run where only loopback exists. Run" >&2
    echo "scripts/test.sh as root, or set DROVER_TEST_NETWORK=host to accept running them" >&2
    echo "with this machine's network (see tests/peers/README.md)." >&2
    exit 1
fi
