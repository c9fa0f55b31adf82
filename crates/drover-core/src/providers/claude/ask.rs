//! Claude Code's tool inputs as typed asks, and its permission suggestions as the
//! sentence a person reads before "allow always" (docs/ARCHITECTURE.md
//! §"Approval rules and the guard").
//!
//! Pure. What must stay true: any tool name and any input give an [`Ask`] (what is not
//! understood is an [`Ask::Other`] with the input as-is); a question tool is always an
//! [`Ask::Question`] (with no questions when its input has none), so its request stays a
//! question; an always-sentence never shows a CLI-internal word (`addRules`,
//! `localSettings`, …): the suggestions themselves stay with the adapter, which applies
//! them scoped to the session ([`super::policy::session_permissions`]).

use serde_json::{Map, Value};

use crate::providers::ask::{FOR_THE_RUN, json_text, quoted_code, replacement_diff as diff};
use crate::providers::wire::str_at;
use crate::providers::{AlwaysOption, Ask, FileChange, Question, QuestionOption};
use crate::text::all_of;

use super::policy::QUESTION_TOOL;

/// The prefix of an MCP tool's name: `mcp__SERVER__TOOL`.
const MCP_PREFIX: &str = "mcp__";

/// The typed ask of a call of `tool` with `input`.
pub fn ask_of(tool: &str, input: &Value) -> Ask {
    let empty = Map::new();
    let map = input.as_object().unwrap_or(&empty);
    let text = |key: &str| str_at(map, key).map(str::to_string);
    match tool {
        QUESTION_TOOL => Ask::Question {
            questions: questions_of(map),
        },
        "Bash" => match str_at(map, "command") {
            Some(command) => Ask::command(command, None, text("description")),
            None => Ask::other(tool, None, input),
        },
        "Edit" | "MultiEdit" | "Write" => match (str_at(map, "file_path"), change_of(tool, map)) {
            (Some(path), Some(change)) => Ask::FileEdit {
                file_path: path.to_string(),
                change,
                other_files: Vec::new(),
            },
            (path, _) => Ask::other(tool, path, input),
        },
        "NotebookEdit" => match str_at(map, "notebook_path") {
            Some(path) => Ask::FileEdit {
                file_path: path.to_string(),
                change: FileChange::Described {
                    description: notebook_change(map),
                },
                other_files: Vec::new(),
            },
            None => Ask::other(tool, None, input),
        },
        "WebFetch" => match str_at(map, "url") {
            Some(url) => Ask::Fetch {
                url: url.to_string(),
            },
            None => Ask::other(tool, None, input),
        },
        mcp if mcp.starts_with(MCP_PREFIX) => {
            let rest = &mcp[MCP_PREFIX.len()..];
            match rest.split_once("__") {
                Some((server, name)) if !server.is_empty() && !name.is_empty() => Ask::McpTool {
                    server: server.to_string(),
                    tool: name.to_string(),
                    arguments: json_text(input),
                },
                _ => Ask::other(tool, None, input),
            }
        }
        _ => Ask::other(tool, subject_of(tool, map), input),
    }
}

/// The part of another tool's input a person wants first.
fn subject_of<'a>(tool: &str, input: &'a Map<String, Value>) -> Option<&'a str> {
    let key = match tool {
        "Read" => "file_path",
        "NotebookRead" => "notebook_path",
        "Glob" | "Grep" => "pattern",
        "LS" => "path",
        "WebSearch" => "query",
        "Task" | "Agent" => "description",
        _ => return None,
    };
    str_at(input, key)
}

/// An edit's or a write's change: a unified diff of the text replaced, or the new
/// content.
fn change_of(tool: &str, input: &Map<String, Value>) -> Option<FileChange> {
    let path = str_at(input, "file_path").unwrap_or("file");
    match tool {
        "Write" => Some(FileChange::Content {
            content: str_at(input, "content")?.to_string(),
        }),
        "Edit" => Some(FileChange::Diff {
            diff: diff(
                path,
                str_at(input, "old_string")?,
                str_at(input, "new_string")?,
            ),
        }),
        "MultiEdit" => {
            let edits = input.get("edits")?.as_array()?;
            let diffs: Vec<String> = edits
                .iter()
                .filter_map(Value::as_object)
                .filter_map(|e| {
                    Some(diff(
                        path,
                        str_at(e, "old_string")?,
                        str_at(e, "new_string")?,
                    ))
                })
                .collect();
            (!diffs.is_empty()).then(|| FileChange::Diff {
                diff: diffs.concat(),
            })
        }
        _ => None,
    }
}

/// A notebook cell edit in words, with the cell's new source.
fn notebook_change(input: &Map<String, Value>) -> String {
    let mode = str_at(input, "edit_mode").unwrap_or("replace");
    let cell = str_at(input, "cell_id")
        .map(|c| format!("cell {c}"))
        .unwrap_or_else(|| "a cell".to_string());
    let head = match mode {
        "insert" => format!("insert a cell after {cell}"),
        "delete" => format!("delete {cell}"),
        _ => format!("replace {cell}"),
    };
    match str_at(input, "new_source").filter(|s| !s.is_empty() && mode != "delete") {
        Some(source) => format!("{head}:\n{source}"),
        None => head,
    }
}

/// The questions of an `AskUserQuestion` input (`questions[{question, header,
/// options[{label, description}], multiSelect}]`); entries without a question are left
/// out.
fn questions_of(input: &Map<String, Value>) -> Vec<Question> {
    input
        .get("questions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter_map(|q| {
            Some(Question {
                question: str_at(q, "question")?.to_string(),
                header: str_at(q, "header").map(str::to_string),
                options: q
                    .get("options")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|o| match o {
                        Value::String(label) => Some(QuestionOption {
                            label: label.clone(),
                            description: None,
                        }),
                        Value::Object(o) => Some(QuestionOption {
                            label: str_at(o, "label")?.to_string(),
                            description: str_at(o, "description").map(str::to_string),
                        }),
                        _ => None,
                    })
                    .collect(),
                multi_select: q.get("multiSelect").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// What "allow always" allows, from the CLI's `permission_suggestions`; `None` when it
/// suggests nothing.
pub fn always_of(suggestions: &Value) -> Option<AlwaysOption> {
    let items = suggestions.as_array().filter(|items| !items.is_empty())?;
    let mut allowed: Vec<String> = Vec::new();
    for item in items.iter().filter_map(Value::as_object) {
        match str_at(item, "type").unwrap_or("") {
            "addRules" | "replaceRules"
                if str_at(item, "behavior").unwrap_or("allow") == "allow" =>
            {
                allowed.extend(
                    item.get("rules")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_object)
                        .filter_map(rule_phrase),
                );
            }
            "addDirectories" => allowed.extend(
                item.get("directories")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|d| format!("work in {}", quoted_code(d))),
            ),
            "setMode" => match str_at(item, "mode") {
                Some("acceptEdits") => allowed.push("every file edit".to_string()),
                Some("bypassPermissions") => allowed.push("every tool use".to_string()),
                _ => {}
            },
            _ => {}
        }
    }
    let sentence = if allowed.is_empty() {
        format!("allow what Claude Code suggests for requests like this one {FOR_THE_RUN}")
    } else {
        format!("allow {} {FOR_THE_RUN}", all_of(&allowed))
    };
    Some(AlwaysOption::new(sentence))
}

/// One permission rule in words: `the Bash command `ls``, `Bash commands starting with
/// `cargo test``, `Edit on `src/**``, `every WebSearch use`.
fn rule_phrase(rule: &Map<String, Value>) -> Option<String> {
    let tool = str_at(rule, "toolName")?;
    let content = str_at(rule, "ruleContent").filter(|c| !c.trim().is_empty());
    Some(match (tool, content) {
        ("Bash", Some(content)) => match content.strip_suffix(":*") {
            Some(prefix) => format!("Bash commands starting with {}", quoted_code(prefix)),
            None => format!("the Bash command {}", quoted_code(content)),
        },
        ("Bash", None) => "every Bash command".to_string(),
        (tool, Some(content)) => format!("{tool} on {}", quoted_code(content)),
        (tool, None) => format!("every {tool} use"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_inputs_become_typed_asks() {
        let question = json!({"questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": false,
             "options": [{"label": "Postgres", "description": "relational"}, "SQLite"]},
            {"question": "Which features?", "multiSelect": true,
             "options": [{"label": "cache"}, {"label": "search"}, {"no": "label"}]},
            {"header": "no question"}]});
        let table: Vec<(&str, Value, Ask)> = vec![
            (
                "Bash",
                json!({"command": "ls -la", "description": "list", "timeout": 5}),
                Ask::Command {
                    command: "ls -la".into(),
                    words: Some(vec!["ls".into(), "-la".into()]),
                    cwd: None,
                    reason: Some("list".into()),
                },
            ),
            (
                "Edit",
                json!({"file_path": "src/main.rs", "old_string": "hello\n", "new_string": "hello, drover\n"}),
                Ask::FileEdit {
                    file_path: "src/main.rs".into(),
                    change: FileChange::Diff {
                        diff: "--- src/main.rs\n+++ src/main.rs\n@@ -1 +1 @@\n-hello\n+hello, drover\n"
                            .into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "MultiEdit",
                json!({"file_path": "a", "edits": [{"old_string": "x", "new_string": "y"}, 7]}),
                Ask::FileEdit {
                    file_path: "a".into(),
                    change: FileChange::Diff {
                        diff: "--- a\n+++ a\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n"
                            .into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "Write",
                json!({"file_path": "src/cache.rs", "content": "// cache\n"}),
                Ask::FileEdit {
                    file_path: "src/cache.rs".into(),
                    change: FileChange::Content {
                        content: "// cache\n".into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "NotebookEdit",
                json!({"notebook_path": "n.ipynb", "cell_id": "c2", "new_source": "print(1)"}),
                Ask::FileEdit {
                    file_path: "n.ipynb".into(),
                    change: FileChange::Described {
                        description: "replace cell c2:\nprint(1)".into(),
                    },
                    other_files: vec![],
                },
            ),
            (
                "WebFetch",
                json!({"url": "https://example.com", "prompt": "summarize"}),
                Ask::Fetch {
                    url: "https://example.com".into(),
                },
            ),
            (
                "mcp__github__create_issue",
                json!({"title": "x"}),
                Ask::McpTool {
                    server: "github".into(),
                    tool: "create_issue".into(),
                    arguments: r#"{"title":"x"}"#.into(),
                },
            ),
            (
                "AskUserQuestion",
                question,
                Ask::Question {
                    questions: vec![
                        Question {
                            question: "Which database?".into(),
                            header: Some("DB".into()),
                            options: vec![
                                QuestionOption {
                                    label: "Postgres".into(),
                                    description: Some("relational".into()),
                                },
                                QuestionOption {
                                    label: "SQLite".into(),
                                    description: None,
                                },
                            ],
                            multi_select: false,
                        },
                        Question {
                            question: "Which features?".into(),
                            header: None,
                            options: vec![
                                QuestionOption {
                                    label: "cache".into(),
                                    description: None,
                                },
                                QuestionOption {
                                    label: "search".into(),
                                    description: None,
                                },
                            ],
                            multi_select: true,
                        },
                    ],
                },
            ),
            // A question tool with nothing to ask is still a question.
            (
                "AskUserQuestion",
                json!("odd"),
                Ask::Question { questions: vec![] },
            ),
            (
                "Grep",
                json!({"pattern": "TODO", "path": "src"}),
                Ask::Other {
                    tool: "Grep".into(),
                    subject: Some("TODO".into()),
                    input: r#"{"pattern":"TODO","path":"src"}"#.into(),
                },
            ),
            (
                "Read",
                json!({"file_path": "README.md"}),
                Ask::Other {
                    tool: "Read".into(),
                    subject: Some("README.md".into()),
                    input: r#"{"file_path":"README.md"}"#.into(),
                },
            ),
            // Unknown tools and broken inputs are shown as they came.
            (
                "TodoWrite",
                json!({"todos": []}),
                Ask::Other {
                    tool: "TodoWrite".into(),
                    subject: None,
                    input: r#"{"todos":[]}"#.into(),
                },
            ),
            (
                "Bash",
                json!({"cmd": 5}),
                Ask::Other {
                    tool: "Bash".into(),
                    subject: None,
                    input: r#"{"cmd":5}"#.into(),
                },
            ),
            (
                "Edit",
                json!({"file_path": "a.rs"}),
                Ask::Other {
                    tool: "Edit".into(),
                    subject: Some("a.rs".into()),
                    input: r#"{"file_path":"a.rs"}"#.into(),
                },
            ),
            (
                "mcp__broken",
                Value::Null,
                Ask::Other {
                    tool: "mcp__broken".into(),
                    subject: None,
                    input: "null".into(),
                },
            ),
        ];
        for (tool, input, expected) in table {
            assert_eq!(ask_of(tool, &input), expected, "{tool} {input}");
        }
    }

    #[test]
    fn suggestions_become_a_sentence_without_cli_words() {
        let rules = |rules: Value| {
            json!([{"type": "addRules", "rules": rules, "behavior": "allow",
                    "destination": "localSettings"}])
        };
        let table: Vec<(Value, Option<&str>)> = vec![
            (
                rules(json!([{"toolName": "Bash", "ruleContent": "ls -la"}])),
                Some("allow the Bash command `ls -la` for the rest of this run"),
            ),
            (
                rules(json!([{"toolName": "Bash", "ruleContent": "cargo test:*"}])),
                Some("allow Bash commands starting with `cargo test` for the rest of this run"),
            ),
            (
                rules(
                    json!([{"toolName": "Edit", "ruleContent": "src/**"}, {"toolName": "WebSearch"}]),
                ),
                Some("allow Edit on `src/**` and every WebSearch use for the rest of this run"),
            ),
            (
                json!([{"type": "addDirectories", "directories": ["/tmp"], "destination": "session"},
                       {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]),
                Some("allow work in `/tmp` and every file edit for the rest of this run"),
            ),
            (
                json!([{"type": "mystery"}, 4]),
                Some(
                    "allow what Claude Code suggests for requests like this one for the rest of this run",
                ),
            ),
            (json!([]), None),
            (Value::Null, None),
            (json!({"type": "addRules"}), None),
        ];
        for (suggestions, expected) in table {
            let got = always_of(&suggestions);
            assert_eq!(
                got.as_ref().map(|a| a.sentence.as_str()),
                expected,
                "{suggestions}"
            );
            if let Some(always) = got {
                for word in [
                    "localSettings",
                    "addRules",
                    "session",
                    "destination",
                    "setMode",
                ] {
                    assert!(!always.sentence.contains(word), "{}", always.sentence);
                }
            }
        }
    }
}
