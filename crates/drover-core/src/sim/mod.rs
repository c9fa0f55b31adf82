//! The simulated agent: a stand-in for Claude Code that drover ships inside itself.
//!
//! `drover sim-agent --scenario NAME|FILE [claude flags]` is a Claude-Code-compatible
//! stream-json CLI. drover's Claude adapter runs it exactly as it runs `claude`, so the
//! demo and most tests exercise the real adapter, dispatcher and ledger code without an
//! API key or a network. What it does is scripted by a scenario ([`scenario`]: turns of
//! steps such as text, tool calls behind permission requests, questions, rate limits,
//! crashes, hangs); [`agent`] plays a scenario over stdin/stdout; [`wire`] holds the
//! shape of every line; [`act`] is what allowed tools really do (`Write` and `Edit`
//! change files in the working directory, a `Bash` step marked `run` runs its command
//! there), so a run's diff is real; [`interactive`] is its interactive mode (a line typed,
//! a line answered, recorded in a transcript of Claude Code's shape), for take-over;
//! [`session`] keeps where each session is in its
//! scenario, so a resumed session goes on where it was, as the real CLI's does.
//!
//! What must stay true: the sim speaks the real `claude` protocol (docs/PROVIDERS.md §"Claude Code") and
//! nothing else. Nothing in it is drover-specific: no extra line types, no extra fields
//! an adapter could come to rely on, no knowledge of drover's run ids, policies or
//! ledger. A behaviour the real CLI does not have belongs in neither the sim nor the
//! adapter; where the sim must choose (ids, timings, default texts), it follows what the
//! real CLI does.

pub mod acp;
pub mod act;
pub mod agent;
pub mod interactive;
pub mod scenario;
pub mod session;
pub mod wire;
