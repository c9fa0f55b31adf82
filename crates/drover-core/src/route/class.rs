//! Task classes and how a spec is classified: its `class` when that is a class word,
//! else its tags, else a simple reading of the task's words.
//!
//! Pure. What must stay true: every spec gets exactly one class, and a spec that names a
//! valid class always gets that one.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::spec::Spec;

/// What kind of work a task is; the rule table says which tiers and capabilities suit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskClass {
    /// Writing or changing code: features, fixes, refactors, tests (also anything
    /// unclassified).
    Code,
    /// Reviewing code: a PR, a diff.
    Review,
    /// Investigating or comparing: finding out why or how.
    Research,
    /// UI and visual design: mockups, screenshots (needs a model that reads images).
    Design,
    /// Writing documentation: READMEs, docs.
    Docs,
}

impl TaskClass {
    /// Every class.
    pub const ALL: [TaskClass; 5] = [
        TaskClass::Code,
        TaskClass::Review,
        TaskClass::Research,
        TaskClass::Design,
        TaskClass::Docs,
    ];

    /// The class as written in specs, tags and the config (`code`, `review`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskClass::Code => "code",
            TaskClass::Review => "review",
            TaskClass::Research => "research",
            TaskClass::Design => "design",
            TaskClass::Docs => "docs",
        }
    }

    /// The class a word names (case-insensitive, surrounding spaces ignored).
    pub fn parse(word: &str) -> Option<TaskClass> {
        let word = word.trim();
        TaskClass::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(word))
    }
}

impl fmt::Display for TaskClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of `spec`: `spec.class` when it is a class word; else the first tag that
/// names a class (`review`, `docs`, `design`, `research`, `code` and a few synonyms);
/// else the task's words: review/PR/diff → review, README/docs/document → docs,
/// UI/design/mockup/screenshot → design, investigate/research/compare/why → research,
/// anything else → code (checked in that order).
pub fn classify(spec: &Spec) -> TaskClass {
    if let Some(class) = spec.class.as_deref().and_then(TaskClass::parse) {
        return class;
    }
    if let Some(class) = spec.tags.iter().find_map(|t| tag_class(t)) {
        return class;
    }
    classify_text(&spec.task)
}

/// The class a tag stands for, if any.
fn tag_class(tag: &str) -> Option<TaskClass> {
    let tag = tag.trim().to_ascii_lowercase();
    TaskClass::parse(&tag).or(match tag.as_str() {
        "doc" | "documentation" | "readme" => Some(TaskClass::Docs),
        "ui" | "ux" | "mockup" => Some(TaskClass::Design),
        "investigation" | "investigate" => Some(TaskClass::Research),
        "pr" | "code-review" | "code_review" => Some(TaskClass::Review),
        "bug" | "bugfix" | "fix" | "feature" | "refactor" | "test" | "tests" => {
            Some(TaskClass::Code)
        }
        _ => None,
    })
}

/// The class a task's words suggest: the first rule (in class order) one word matches.
pub fn classify_text(task: &str) -> TaskClass {
    let lower = task.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let any = |exact: &[&str], prefixes: &[&str]| {
        words
            .iter()
            .any(|w| exact.contains(w) || prefixes.iter().any(|p| w.starts_with(p)))
    };
    if any(&["pr", "prs", "diff", "diffs"], &["review"]) || lower.contains("pull request") {
        TaskClass::Review
    } else if any(&["readme", "docs", "doc"], &["document"]) {
        TaskClass::Docs
    } else if any(
        &[
            "ui",
            "ux",
            "design",
            "designs",
            "designed",
            "designing",
            "redesign",
        ],
        &["mockup", "screenshot"],
    ) {
        TaskClass::Design
    } else if any(
        &["why", "compare", "compared", "comparing", "comparison"],
        &["investigat", "research"],
    ) {
        TaskClass::Research
    } else {
        TaskClass::Code
    }
}
