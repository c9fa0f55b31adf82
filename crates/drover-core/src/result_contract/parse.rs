//! Finding the worker's last result block and handing its lines to `fields`.
//!
//! Owns where a block starts and ends. What must stay true: only headings outside code
//! fences count; the last result heading wins; a block ends at the next heading of the
//! same or a higher level (any heading, for a bold `**Result**`), at a horizontal rule,
//! or at the end of the text; the text is read in two forward passes.

use super::block::ResultBlock;
use super::fields::Fields;
use super::markdown::{FenceRole, FenceTracker, atx_heading, is_rule, lines, result_heading};

/// The `## Result` block at the end of a worker's answer. `found` is false when the
/// answer has no result heading outside code blocks.
pub fn parse_result(text: &str) -> ResultBlock {
    let Some((body_start, level)) = last_result_heading(text) else {
        return ResultBlock::default();
    };
    let body = text.get(body_start..).unwrap_or_default();
    let mut fields = Fields::default();
    let mut fences = FenceTracker::default();
    for line in lines(body) {
        // Code inside the block (an example, a diff) is not part of the contract.
        if fences.step(line.text) != FenceRole::Outside {
            continue;
        }
        if is_rule(line.text) {
            break;
        }
        if let Some((heading_level, _)) = atx_heading(line.text) {
            if heading_level <= level {
                break;
            }
            fields.separator();
            continue;
        }
        fields.line(line.text);
    }
    fields.finish()
}

/// Where the body of the last result heading starts, and the heading's level.
fn last_result_heading(text: &str) -> Option<(usize, usize)> {
    let mut fences = FenceTracker::default();
    let mut last = None;
    for line in lines(text) {
        if fences.step(line.text) != FenceRole::Outside {
            continue;
        }
        if let Some(level) = result_heading(line.text) {
            last = Some((line.next, level));
        }
    }
    last
}
