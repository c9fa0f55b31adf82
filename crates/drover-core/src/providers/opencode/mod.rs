//! The OpenCode adapter: runs `opencode serve` on a loopback port per run and drives one
//! session over its HTTP API and `/event` stream (docs/PROVIDERS.md §"OpenCode";
//! docs/ARCHITECTURE.md §"Providers").
//!
//! Split by responsibility: [`launch`](mod@launch) builds the server's command line and environment
//! (loopback only, a password per run, permission rules from the run's policy),
//! [`protocol`] turns the server's events into drover events and drover's answers into
//! request bodies (pure), [`ask`] types its permission requests, questions and tool
//! calls (pure), and [`adapter`] drives one server per run on top of the
//! provider-neutral [`crate::providers::process`]. What must stay true is the adapter
//! contract of [`crate::providers`]: exactly one `Exited` last, a `Notice` for whatever
//! cannot be understood, and no child outliving its run.

pub mod adapter;
pub mod ask;
pub mod launch;
pub mod protocol;

pub use adapter::{AdapterTimings, launch, launch_with};
