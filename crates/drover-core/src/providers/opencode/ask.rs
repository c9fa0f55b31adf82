//! OpenCode's permission requests, questions and tool calls as typed asks, and its
//! `always` patterns as the sentence a person reads before "allow always" (docs/ARCHITECTURE.md
//! §"Approval rules and the guard").
//!
//! Pure. What must stay true: any permission, tool and input give an [`Ask`] (what is
//! not understood is an [`Ask::Other`] with the input as-is, never a panic); a question
//! keeps every entry that asks something, in order, since the answer OpenCode takes is
//! one list of labels per question, by position; an always-sentence never shows an
//! OpenCode-internal word.

use serde_json::{Map, Value};

use crate::providers::ask::{FOR_THE_RUN, quoted_code, replacement_diff};
use crate::providers::wire::str_at;
use crate::providers::{AlwaysOption, Ask, EditedFile, FileChange, Question, QuestionOption};
use crate::text::all_of;

/// The typed ask of a `permission.asked` for `permission` with its `patterns` and
/// `metadata` (`input` is what drover keeps of the request, shown when nothing better
/// is known).
pub fn permission_ask(permission: &str, props: &Map<String, Value>, input: &Value) -> Ask {
    let empty = Map::new();
    let metadata = props
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let patterns: Vec<&str> = props
        .get("patterns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let first_pattern = patterns.first().copied();
    match permission {
        "bash" => match str_at(metadata, "command") {
            Some(command) => Ask::command(
                command,
                None,
                str_at(metadata, "description").map(str::to_string),
            ),
            None => Ask::other(permission, first_pattern, input),
        },
        "edit" => edit_ask(metadata, first_pattern).unwrap_or_else(|| {
            Ask::other(
                permission,
                str_at(metadata, "filepath").or(first_pattern),
                input,
            )
        }),
        "webfetch" => match str_at(metadata, "url").or(first_pattern) {
            Some(url) => Ask::Fetch {
                url: url.to_string(),
            },
            None => Ask::other(permission, None, input),
        },
        "external_directory" => Ask::other(
            permission,
            str_at(metadata, "parentDir")
                .or_else(|| str_at(metadata, "filepath"))
                .or(first_pattern),
            input,
        ),
        _ => Ask::other(permission, first_pattern, input),
    }
}

/// An `edit` permission's files: `metadata.files` (`apply_patch`, one entry per file
/// with its `patch`), else `metadata.filepath` (or the first pattern) with
/// `metadata.diff`.
fn edit_ask(metadata: &Map<String, Value>, first_pattern: Option<&str>) -> Option<Ask> {
    let mut files: Vec<EditedFile> = metadata
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter_map(|f| {
            let path = str_at(f, "filePath").or_else(|| str_at(f, "relativePath"))?;
            let patch = str_at(f, "patch").unwrap_or("").to_string();
            let change = match str_at(f, "type") {
                Some("delete") => FileChange::Delete,
                Some("move") => FileChange::Move {
                    to: str_at(f, "movePath").unwrap_or("").to_string(),
                    diff: patch,
                },
                _ => FileChange::Diff { diff: patch },
            };
            Some(EditedFile {
                file_path: path.to_string(),
                change,
            })
        })
        .collect();
    if files.is_empty() {
        let path = str_at(metadata, "filepath").or(first_pattern)?;
        let change = match str_at(metadata, "diff") {
            Some(diff) => FileChange::Diff {
                diff: diff.to_string(),
            },
            None => FileChange::Described {
                description: "changed".into(),
            },
        };
        files.push(EditedFile {
            file_path: path.to_string(),
            change,
        });
    }
    let first = files.remove(0);
    Some(Ask::FileEdit {
        file_path: first.file_path,
        change: first.change,
        other_files: files,
    })
}

/// The typed ask of a tool part: `tool` called with `input` (OpenCode's tool ids and
/// their camel-case inputs).
pub fn tool_ask(tool: &str, input: &Value) -> Ask {
    let empty = Map::new();
    let map = input.as_object().unwrap_or(&empty);
    let path = str_at(map, "filePath");
    match tool {
        "bash" => match str_at(map, "command") {
            Some(command) => Ask::command(
                command,
                None,
                str_at(map, "description").map(str::to_string),
            ),
            None => Ask::other(tool, None, input),
        },
        "edit" => match (path, str_at(map, "oldString"), str_at(map, "newString")) {
            (Some(path), Some(old), Some(new)) => Ask::FileEdit {
                file_path: path.to_string(),
                change: FileChange::Diff {
                    diff: replacement_diff(path, old, new),
                },
                other_files: Vec::new(),
            },
            (path, ..) => Ask::other(tool, path, input),
        },
        "write" => match (path, str_at(map, "content")) {
            (Some(path), Some(content)) => Ask::FileEdit {
                file_path: path.to_string(),
                change: FileChange::Content {
                    content: content.to_string(),
                },
                other_files: Vec::new(),
            },
            (path, _) => Ask::other(tool, path, input),
        },
        "webfetch" => match str_at(map, "url") {
            Some(url) => Ask::Fetch {
                url: url.to_string(),
            },
            None => Ask::other(tool, None, input),
        },
        "question" => Ask::Question {
            questions: questions_of(input),
        },
        _ => {
            let subject = match tool {
                "read" => path,
                "glob" | "grep" => str_at(map, "pattern"),
                "list" => str_at(map, "path"),
                "websearch" | "codesearch" => str_at(map, "query"),
                "task" => str_at(map, "description"),
                _ => None,
            };
            Ask::other(tool, subject, input)
        }
    }
}

/// The questions of a `question.asked` (`[{question, header, options[{label,
/// description}], multiple}]`); entries that ask nothing are left out.
pub fn questions_of(questions: &Value) -> Vec<Question> {
    let list = match questions {
        Value::Object(map) => map.get("questions"),
        other => Some(other),
    };
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter_map(|q| {
            Some(Question {
                question: str_at(q, "question")?.to_string(),
                header: str_at(q, "header")
                    .filter(|h| !h.is_empty())
                    .map(str::to_string),
                options: q
                    .get("options")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object)
                    .filter_map(|o| {
                        Some(QuestionOption {
                            label: str_at(o, "label")?.to_string(),
                            description: str_at(o, "description")
                                .filter(|d| !d.is_empty())
                                .map(str::to_string),
                        })
                    })
                    .collect(),
                multi_select: q.get("multiple").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// What replying `always` allows, from the request's `always` patterns; `None` when it
/// has none (an `always` would then be the same as `once`).
pub fn always_of(permission: &str, always: Option<&Value>) -> Option<AlwaysOption> {
    let patterns: Vec<&str> = always?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .collect();
    if patterns.is_empty() {
        return None;
    }
    let noun = match permission {
        "bash" => "commands",
        "edit" => "file edits",
        "webfetch" => "web fetches",
        "external_directory" => "work outside the project",
        other => other,
    };
    let what = if patterns.contains(&"*") {
        match permission {
            "external_directory" => "work in any directory".to_string(),
            _ => format!("all {noun}"),
        }
    } else {
        let quoted: Vec<String> = patterns.iter().map(|p| quoted_code(p)).collect();
        match permission {
            "external_directory" => format!("work in {}", all_of(&quoted)),
            _ => format!("{noun} matching {}", all_of(&quoted)),
        }
    };
    Some(AlwaysOption::new(format!("allow {what} {FOR_THE_RUN}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn permissions_become_typed_asks() {
        let table: Vec<(&str, Value, Ask)> = vec![
            (
                "bash",
                json!({"patterns": ["touch x"], "metadata": {"command": "touch x"}}),
                Ask::command("touch x", None, None),
            ),
            (
                "edit",
                json!({"patterns": ["a.txt"], "metadata": {"filepath": "/w/a.txt", "diff": "@@ -1 +1 @@\n-a\n+b\n"}}),
                Ask::FileEdit {
                    file_path: "/w/a.txt".into(),
                    change: FileChange::Diff {
                        diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "edit",
                json!({"patterns": ["a.txt", "b.txt"], "metadata": {"filepath": "a.txt, b.txt", "diff": "…",
                       "files": [{"filePath": "/w/a.txt", "type": "update", "patch": "-a\n+b\n"},
                                 {"filePath": "/w/b.txt", "type": "move", "movePath": "/w/c.txt", "patch": ""},
                                 {"filePath": "/w/d.txt", "type": "delete", "patch": "-d\n"},
                                 {"type": "add"}]}}),
                Ask::FileEdit {
                    file_path: "/w/a.txt".into(),
                    change: FileChange::Diff {
                        diff: "-a\n+b\n".into(),
                    },
                    other_files: vec![
                        EditedFile {
                            file_path: "/w/b.txt".into(),
                            change: FileChange::Move {
                                to: "/w/c.txt".into(),
                                diff: String::new(),
                            },
                        },
                        EditedFile {
                            file_path: "/w/d.txt".into(),
                            change: FileChange::Delete,
                        },
                    ],
                },
            ),
            (
                "webfetch",
                json!({"patterns": ["https://example.com"], "metadata": {"url": "https://example.com", "format": "markdown"}}),
                Ask::Fetch {
                    url: "https://example.com".into(),
                },
            ),
            (
                "external_directory",
                json!({"patterns": ["/etc/*"], "metadata": {"filepath": "/etc/hosts", "parentDir": "/etc"}}),
                Ask::Other {
                    tool: "external_directory".into(),
                    subject: Some("/etc".into()),
                    input: "{}".into(),
                },
            ),
            (
                "doom_loop",
                json!({"patterns": ["*"]}),
                Ask::Other {
                    tool: "doom_loop".into(),
                    subject: Some("*".into()),
                    input: "{}".into(),
                },
            ),
            // Shapes the adapter cannot read are shown as they came.
            (
                "bash",
                json!({"patterns": ["ls"], "metadata": 7}),
                Ask::Other {
                    tool: "bash".into(),
                    subject: Some("ls".into()),
                    input: "{}".into(),
                },
            ),
            (
                "edit",
                json!({"metadata": {}}),
                Ask::Other {
                    tool: "edit".into(),
                    subject: None,
                    input: "{}".into(),
                },
            ),
        ];
        for (permission, request, expected) in table {
            let got = permission_ask(permission, &props(request.clone()), &json!({}));
            assert_eq!(got, expected, "{permission} {request}");
        }
    }

    #[test]
    fn tool_calls_become_typed_asks() {
        let table: Vec<(&str, Value, Ask)> = vec![
            (
                "bash",
                json!({"command": "touch x", "description": "Make x"}),
                Ask::command("touch x", None, Some("Make x".into())),
            ),
            (
                "edit",
                json!({"filePath": "/w/a.txt", "oldString": "a\n", "newString": "b\n"}),
                Ask::FileEdit {
                    file_path: "/w/a.txt".into(),
                    change: FileChange::Diff {
                        diff: "--- /w/a.txt\n+++ /w/a.txt\n@@ -1 +1 @@\n-a\n+b\n".into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "write",
                json!({"filePath": "/w/n.txt", "content": "new\n"}),
                Ask::FileEdit {
                    file_path: "/w/n.txt".into(),
                    change: FileChange::Content {
                        content: "new\n".into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "webfetch",
                json!({"url": "https://example.com", "format": "text"}),
                Ask::Fetch {
                    url: "https://example.com".into(),
                },
            ),
            (
                "grep",
                json!({"pattern": "TODO"}),
                Ask::Other {
                    tool: "grep".into(),
                    subject: Some("TODO".into()),
                    input: r#"{"pattern":"TODO"}"#.into(),
                },
            ),
            (
                "github_search",
                json!({"q": 1}),
                Ask::Other {
                    tool: "github_search".into(),
                    subject: None,
                    input: r#"{"q":1}"#.into(),
                },
            ),
            (
                "edit",
                json!("odd"),
                Ask::Other {
                    tool: "edit".into(),
                    subject: None,
                    input: r#""odd""#.into(),
                },
            ),
        ];
        for (tool, input, expected) in table {
            assert_eq!(tool_ask(tool, &input), expected, "{tool} {input}");
        }
    }

    #[test]
    fn questions_keep_their_options_and_whether_several_may_be_chosen() {
        let questions = json!([
            {"question": "Which colour?", "header": "Colour", "multiple": true,
             "options": [{"label": "Blue", "description": "calm"}, {"label": "Red", "description": ""}]},
            {"header": "nothing asked"},
            {"question": "How big?", "options": "none"}]);
        assert_eq!(
            questions_of(&questions),
            vec![
                Question {
                    question: "Which colour?".into(),
                    header: Some("Colour".into()),
                    options: vec![
                        QuestionOption {
                            label: "Blue".into(),
                            description: Some("calm".into()),
                        },
                        QuestionOption {
                            label: "Red".into(),
                            description: None,
                        },
                    ],
                    multi_select: true,
                },
                Question {
                    question: "How big?".into(),
                    header: None,
                    options: vec![],
                    multi_select: false,
                },
            ]
        );
        assert_eq!(questions_of(&json!("x")), vec![]);
    }

    #[test]
    fn always_patterns_become_a_sentence() {
        let table: Vec<(&str, Value, Option<&str>)> = vec![
            (
                "bash",
                json!(["touch *"]),
                Some("allow commands matching `touch *` for the rest of this run"),
            ),
            (
                "bash",
                json!(["git status *", "git diff *"]),
                Some(
                    "allow commands matching `git status *` and `git diff *` for the rest of this run",
                ),
            ),
            (
                "edit",
                json!(["*"]),
                Some("allow all file edits for the rest of this run"),
            ),
            (
                "external_directory",
                json!(["/tmp/x/*"]),
                Some("allow work in `/tmp/x/*` for the rest of this run"),
            ),
            ("bash", json!([]), None),
            ("bash", json!("touch *"), None),
            ("bash", Value::Null, None),
        ];
        for (permission, always, expected) in table {
            let got = always_of(permission, Some(&always));
            assert_eq!(
                got.as_ref().map(|a| a.sentence.as_str()),
                expected,
                "{permission} {always}"
            );
        }
        assert_eq!(always_of("bash", None), None);
    }
}
