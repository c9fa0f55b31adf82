//! The Claude Code adapter: runs `claude` with stream-json in and out and permission
//! requests over stdio (docs/PROVIDERS.md §"Claude Code"; docs/ARCHITECTURE.md §"Providers").
//!
//! Split by responsibility: [`policy`] maps drover's permission policy and capability
//! onto the CLI, [`args`] builds its command line, [`protocol`] reads its stdout lines
//! (pure), [`ask`] types its tool inputs and permission suggestions (pure), [`encode`]
//! writes its stdin lines (pure), and [`adapter`] makes them the [`Protocol`] one child
//! per run speaks on the provider-neutral session loop ([`crate::providers::session`]).
//! What must stay true is the adapter contract of [`crate::providers`]: exactly one
//! `Exited` last, a `Notice` for whatever cannot be understood, and no child outliving
//! its run.
//!
//! [`Protocol`]: crate::providers::session::Protocol

pub mod adapter;
pub mod args;
pub mod ask;
pub mod encode;
pub mod policy;
pub mod protocol;

pub use adapter::{AdapterTimings, launch, launch_with};
