//! Reading the keys of one result block, line by line.
//!
//! Owns the key grammar: `key: value`, keys case-insensitive, optionally bulleted or
//! bolded, values inline or continued on the lines below. What must stay true: work and
//! memory are linear in the block; caps are applied once, at `finish`; a line is either a
//! key, a continuation of the key before it, or ignored: it never fails the parse.
//!
//! Continuations: `summary` continues over the following non-key lines until a blank
//! line (it is one or two sentences, and prose after the block must not leak in);
//! `question` continues across blank lines until the next key (a question may need more
//! than one paragraph). A list takes the bullet lines below its key, across blank lines;
//! a list with no inline value also takes plain lines directly below it; an indented
//! plain line right under a bullet continues that bullet.

use crate::text::{clip, one_line};

use super::block::{ITEM_MAX_CHARS, LIST_MAX_ITEMS, ResultBlock, ResultStatus, TEXT_MAX_CHARS};
use super::markdown::{indent, strip_bullet};

/// Text longer than this many bytes cannot survive the character caps; stop growing it.
const GROWTH_LIMIT_BYTES: usize = TEXT_MAX_CHARS * 4 + 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Changes,
    Files,
    FollowUps,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Status,
    Summary,
    Question,
    List(List),
}

/// The key whose value following lines may continue.
#[derive(Debug, Clone, Copy, Default)]
enum Open {
    #[default]
    Nothing,
    /// `status:` with nothing after it: the next line is the value.
    Status,
    Summary,
    Question,
    List {
        list: List,
        key_indent: usize,
        /// The key line had an inline value.
        inline: bool,
        /// No blank line since the key or the last item.
        contiguous: bool,
        /// The last item came from a bullet (so an indented line may continue it).
        after_bullet: bool,
    },
}

/// Accumulates one block's fields.
#[derive(Debug, Default)]
pub struct Fields {
    open: Open,
    raw_status: Option<String>,
    summary: String,
    question: String,
    changes: Vec<String>,
    files: Vec<String>,
    follow_ups: Vec<String>,
}

impl Fields {
    /// A line of the block (outside code fences, not a heading or rule).
    pub fn line(&mut self, line: &str) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            self.blank();
            return;
        }
        let bullet = strip_bullet(trimmed);
        let line_indent = indent(line);
        if let Some((key, value)) = key_line(bullet.unwrap_or(trimmed)) {
            // "- files: x" indented under a list key is an item of that list, not a key.
            let nested = matches!(self.open, Open::List { key_indent, .. }
                if bullet.is_some() && line_indent > key_indent);
            if !nested {
                self.key(key, value, line_indent);
                return;
            }
        }
        self.text(trimmed, bullet, line_indent);
    }

    /// A heading inside the block: whatever was open is closed.
    pub fn separator(&mut self) {
        self.open = Open::Nothing;
    }

    pub fn finish(self) -> ResultBlock {
        let text = |s: String| {
            let s = one_line(&s);
            (!s.is_empty() && !is_none_marker(&s)).then(|| clip(&s, TEXT_MAX_CHARS))
        };
        let raw_status = self.raw_status.map(|s| clip(&one_line(&s), ITEM_MAX_CHARS));
        ResultBlock {
            found: true,
            status: raw_status.as_deref().and_then(ResultStatus::from_word),
            raw_status,
            summary: text(self.summary),
            question: text(self.question),
            changes: finish_list(self.changes),
            files: finish_list(self.files),
            follow_ups: finish_list(self.follow_ups),
        }
    }

    fn blank(&mut self) {
        match &mut self.open {
            Open::Summary if !self.summary.is_empty() => self.open = Open::Nothing,
            Open::List { contiguous, .. } => *contiguous = false,
            _ => {}
        }
    }

    fn key(&mut self, key: Key, value: &str, key_indent: usize) {
        self.open = Open::Nothing;
        match key {
            Key::Status if value.is_empty() => self.open = Open::Status,
            Key::Status => self.raw_status = Some(value.to_string()),
            Key::Summary => {
                self.summary.clear();
                append(&mut self.summary, value);
                self.open = Open::Summary;
            }
            Key::Question => {
                self.question.clear();
                append(&mut self.question, value);
                self.open = Open::Question;
            }
            Key::List(list) => {
                if !value.is_empty() {
                    if list == List::Files {
                        for file in value.split(',') {
                            self.push_item(list, file);
                        }
                    } else {
                        self.push_item(list, value);
                    }
                }
                self.open = Open::List {
                    list,
                    key_indent,
                    inline: !value.is_empty(),
                    contiguous: true,
                    after_bullet: false,
                };
            }
        }
    }

    fn text(&mut self, trimmed: &str, bullet: Option<&str>, line_indent: usize) {
        let content = bullet.unwrap_or(trimmed);
        match self.open {
            Open::Nothing => {}
            Open::Status => {
                self.raw_status = Some(content.to_string());
                self.open = Open::Nothing;
            }
            Open::Summary => append(&mut self.summary, content),
            Open::Question => append(&mut self.question, content),
            Open::List {
                list,
                key_indent,
                inline,
                contiguous,
                after_bullet,
            } => {
                if let Some(item) = bullet {
                    self.push_item(list, item);
                    self.open = Open::List {
                        list,
                        key_indent,
                        inline,
                        contiguous: true,
                        after_bullet: true,
                    };
                } else if contiguous && after_bullet && line_indent > key_indent {
                    if let Some(last) = self.list_mut(list).last_mut() {
                        append(last, trimmed);
                    }
                } else if contiguous && !inline {
                    self.push_item(list, trimmed);
                    self.open = Open::List {
                        list,
                        key_indent,
                        inline,
                        contiguous: true,
                        after_bullet: false,
                    };
                } else {
                    // Prose after the list: the list is over.
                    self.open = Open::Nothing;
                }
            }
        }
    }

    fn list_mut(&mut self, list: List) -> &mut Vec<String> {
        match list {
            List::Changes => &mut self.changes,
            List::Files => &mut self.files,
            List::FollowUps => &mut self.follow_ups,
        }
    }

    fn push_item(&mut self, list: List, item: &str) {
        let mut item = item.trim();
        if list == List::Files {
            item = item.trim_matches('`').trim();
        }
        if item.is_empty() || is_none_marker(item) {
            return;
        }
        let items = self.list_mut(list);
        if items.len() < LIST_MAX_ITEMS {
            items.push(item.to_string());
        }
    }
}

/// `text` appended with a separating space, unless it has already outgrown any cap.
fn append(target: &mut String, text: &str) {
    let text = text.trim();
    if text.is_empty() || target.len() > GROWTH_LIMIT_BYTES {
        return;
    }
    if !target.is_empty() {
        target.push(' ');
    }
    target.push_str(text);
}

fn finish_list(items: Vec<String>) -> Vec<String> {
    items
        .into_iter()
        .map(|item| clip(&one_line(&item), ITEM_MAX_CHARS))
        .filter(|item| !item.is_empty())
        .collect()
}

/// A value that means "nothing": `none`, `n/a`, `-`, `(none)`, `[]`, …
fn is_none_marker(value: &str) -> bool {
    let v = value
        .trim()
        .trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | '*' | '_' | '`' | '.'))
        .trim();
    ["", "none", "n/a", "na", "-", "—", "–", "nothing"]
        .iter()
        .any(|marker| v.eq_ignore_ascii_case(marker))
}

/// A `key: value` line with a known key; `line` has its bullet already removed.
fn key_line(line: &str) -> Option<(Key, &str)> {
    // Keys are short; looking for the colon near the start keeps long lines cheap.
    let colon = line.bytes().take(40).position(|b| b == b':')?;
    let key = normalize_key(&line[..colon])?;
    let value = line[colon + 1..].trim_start();
    // "**status:** done": the bold closes after the colon.
    let value = value
        .strip_prefix("**")
        .or_else(|| value.strip_prefix("__"))
        .unwrap_or(value);
    Some((key, value.trim()))
}

fn normalize_key(raw: &str) -> Option<Key> {
    let mut word = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !matches!(c, ' ' | '\t' | '-' | '_' | '*' | '`') {
            return None;
        }
    }
    match word.as_str() {
        "status" => Some(Key::Status),
        "summary" => Some(Key::Summary),
        "question" => Some(Key::Question),
        "changes" | "change" => Some(Key::List(List::Changes)),
        "files" | "file" => Some(Key::List(List::Files)),
        "followups" | "followup" => Some(Key::List(List::FollowUps)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lines_accept_case_bold_and_spelling_variants() {
        let cases: &[(&str, Option<(Key, &str)>)] = &[
            ("status: done", Some((Key::Status, "done"))),
            ("Status:done", Some((Key::Status, "done"))),
            ("STATUS : done", Some((Key::Status, "done"))),
            ("**status**: done", Some((Key::Status, "done"))),
            ("**Status:** done", Some((Key::Status, "done"))),
            ("__summary__: ok", Some((Key::Summary, "ok"))),
            ("`files`: a.rs", Some((Key::List(List::Files), "a.rs"))),
            ("follow_ups: x", Some((Key::List(List::FollowUps), "x"))),
            ("follow-ups: x", Some((Key::List(List::FollowUps), "x"))),
            ("Follow ups: x", Some((Key::List(List::FollowUps), "x"))),
            ("followups:", Some((Key::List(List::FollowUps), ""))),
            (
                "changes: did x: then y",
                Some((Key::List(List::Changes), "did x: then y")),
            ),
            ("note: status: done", None),
            ("https://example.com", None),
            ("the status is: done", None),
            ("no colon here", None),
        ];
        for &(line, want) in cases {
            assert_eq!(key_line(line), want, "{line:?}");
        }
    }

    #[test]
    fn none_markers_mean_empty() {
        for v in [
            "none", "None.", "N/A", "n/a", "-", "—", "(none)", "[]", "*none*", "nothing",
        ] {
            assert!(is_none_marker(v), "{v:?}");
        }
        for v in ["no tests", "nonexistent.rs", "a-b"] {
            assert!(!is_none_marker(v), "{v:?}");
        }
    }
}
