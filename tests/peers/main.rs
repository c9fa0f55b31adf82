//! Conformance tests against the real provider CLIs (the versions pinned in
//! `tests/peers/package.json`), each talking to a mock model API on 127.0.0.1.
//!
//! - `claude`: Claude Code driven through drover's headless interface (`drover serve`,
//!   `dispatch`, `respond`, `follow-up`, `stop`, `show --json`, `transcript`).
//! - `codex`: Codex driven through drover's headless interface, in both modes (`ask`:
//!   `codex app-server`; `restricted`/`auto`: `codex exec` per turn), plus one direct
//!   `codex exec` run that pins the CLI facts the exec mode relies on.
//! - `opencode`: OpenCode driven through drover's headless interface, like `claude`.
//! - `acp`: the ACP agents (`opencode acp`, `claude-agent-acp`, `codex-acp`) as drover's
//!   ACP providers, through the same interface.
//! - `mock_api`: the mocks' own wire format, checked with a plain HTTP client.
//! - `inspector`: `drover mcp` under the official MCP Inspector's CLI, every tool called.
//!
//! The CLIs are installed by `npm ci` in `tests/peers/` (scripts/test.sh does it). Their
//! absence fails the tests with that instruction; nothing is skipped. No test sends
//! traffic anywhere but 127.0.0.1, and every wait is bounded: the CLIs retry a dead API
//! forever. They run where only loopback exists (`loopback`: scripts/test.sh runs the
//! tests in a network namespace of their own), so nothing a CLI starts can reach past it.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod acp;
mod caps;
mod claude;
mod codex;
mod drover;
mod hosts;
mod inspector;
mod loopback;
mod mock;
mod mock_api;
mod opencode;
mod peers;
mod sandbox;
#[path = "../common/sshd.rs"]
mod sshd;
mod tmux;
