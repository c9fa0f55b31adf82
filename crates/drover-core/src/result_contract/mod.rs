//! The result contract (docs/ARCHITECTURE.md §"Result contract"): what a worker's final
//! answer says about how the task went.
//!
//! Owns reading the `## Result` block ([`parse_result`]) and the JSON answer of runs with
//! an output schema ([`parse_json_result`]). What must stay true: pure functions of the
//! text (no I/O, no clock); they never panic and stay linear-time on hostile input (huge
//! lines, unterminated fences, stray headings); whatever they return is capped (see
//! [`block`]'s constants), so it can be stored and shown as is. A missing or unreadable
//! block is a value (`found: false`, `status: None`), never an error: deciding on a
//! retry turn is the dispatcher's job.
//!
//! Files: `block` (the result and its status words), `markdown` (lines, fences,
//! headings), `parse` (locating the block), `fields` (its keys), `json`.

pub mod block;
mod fields;
mod json;
mod markdown;
mod parse;

#[cfg(test)]
mod tests;

pub use block::{ITEM_MAX_CHARS, LIST_MAX_ITEMS, ResultBlock, ResultStatus, TEXT_MAX_CHARS};
pub use json::parse_json_result;
pub use markdown::result_heading;
pub use parse::parse_result;
