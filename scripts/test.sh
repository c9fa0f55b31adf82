#!/usr/bin/env bash
# The one test command (README): builds drover and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --all-features "$@"
