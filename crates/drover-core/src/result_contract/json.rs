//! The JSON answer of a run that was given an output schema.
//!
//! Owns extraction only (the schema check belongs to the dispatcher). What must stay
//! true: the whole answer wins when it is JSON; otherwise the last fenced block (`json`
//! or no language) that parses wins; only objects and arrays count; each candidate is
//! parsed once, so the work is linear in the text, and serde_json's depth limit keeps
//! hostile nesting from overflowing the stack.

use serde_json::Value;

use super::markdown::{FenceRole, FenceTracker, lines};

/// The JSON object or array the worker answered with, if any.
pub fn parse_json_result(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if trimmed.starts_with(['{', '['])
        && let Some(value) = container(trimmed)
    {
        return Some(value);
    }
    let mut fences = FenceTracker::default();
    // Where the open fence's content starts, if its language is one we read.
    let mut open: Option<Option<usize>> = None;
    let mut last = None;
    for line in lines(text) {
        match fences.step(line.text) {
            FenceRole::Open { info } => open = Some(is_json_info(info).then_some(line.next)),
            FenceRole::Close => {
                if let Some(Some(start)) = open.take() {
                    last = text.get(start..line.start).and_then(container).or(last);
                }
            }
            FenceRole::Outside | FenceRole::Inside => {}
        }
    }
    // A fence left open runs to the end of the text.
    if let Some(Some(start)) = open {
        last = text.get(start..).and_then(container).or(last);
    }
    last
}

fn container(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

/// A fence with no language or with `json` (`json title="x"` too).
fn is_json_info(info: &str) -> bool {
    match info.split_whitespace().next() {
        None => true,
        Some(lang) => lang.eq_ignore_ascii_case("json"),
    }
}
