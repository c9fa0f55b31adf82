//! The typed ask: what a provider wants to do (run a command, change a file, fetch a
//! page, call an MCP tool, something else) or asks the user, built by its adapter from
//! the CLI's own request (docs/ARCHITECTURE.md §"Approval rules and the guard"), and the
//! "allow always" option it offers.
//!
//! Owns the shapes every view, rule and summary reads instead of a provider's JSON.
//! What must stay true:
//! - only adapters build an [`Ask`] from a CLI's request; what an adapter cannot read
//!   becomes [`Ask::Other`] with the input as-is, never a panic;
//! - the JSON keys `command`, `file_path` and `questions[i].question` are part of the
//!   public `show --json` shape (`pending[i].input`) and keep their names;
//! - [`Ask::summary`] is the one line a person wants first, and is never empty for an
//!   ask that says anything;
//! - an [`AlwaysOption`] is a sentence a person reads, never a CLI-internal word; what
//!   an adapter needs to carry it out stays with the adapter.

use serde::{Deserialize, Serialize};

use super::RequestKind;
use crate::redact::Redactor;

/// What a provider asks permission for, or asks the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ask {
    /// A shell command: its text, its words where known (the CLI's argv, else the text
    /// split as a POSIX shell would when it parses), the directory it runs in, and why
    /// the agent says it runs it.
    Command {
        /// The command line as the agent wrote it.
        command: String,
        /// Its words; `None` when the text does not parse as a shell's.
        words: Option<Vec<String>>,
        /// Where it runs, when the CLI says.
        cwd: Option<String>,
        /// Why the agent runs it, in its words.
        reason: Option<String>,
    },
    /// A file edit or write: the path and the change; a patch that touches several
    /// files names the others in `other_files`.
    FileEdit {
        /// The file (the first one of a patch).
        file_path: String,
        /// How it changes.
        change: FileChange,
        /// The patch's other files, in its order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        other_files: Vec<EditedFile>,
    },
    /// Fetching a web page.
    Fetch {
        /// The page's address.
        url: String,
    },
    /// A tool of an MCP server, with its arguments as JSON text (shown as is).
    McpTool {
        /// The server's name in the CLI's config.
        server: String,
        /// The tool's name on that server.
        tool: String,
        /// The call's arguments, JSON text.
        arguments: String,
    },
    /// Questions for the user: each with its options and whether several may be chosen.
    Question {
        /// The questions, in the CLI's order (answers follow it).
        questions: Vec<Question>,
    },
    /// Anything else: the tool's name, the part a person wants first (a pattern, a
    /// query, a path), and its input as JSON text (shown as is).
    Other {
        /// The provider's name of the tool.
        tool: String,
        /// What of the input a person wants first, when the adapter can tell.
        subject: Option<String>,
        /// The tool's input, JSON text.
        input: String,
    },
}

/// One file of a patch that touches several.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EditedFile {
    /// The file.
    pub file_path: String,
    /// How it changes.
    pub change: FileChange,
}

/// How a file changes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileChange {
    /// The change as a unified diff.
    Diff {
        /// The diff's text.
        diff: String,
    },
    /// The file's new content, whole (a new file, or one written over).
    Content {
        /// The content.
        content: String,
    },
    /// The file moves to `to`, changed by `diff` (empty when only moved).
    Move {
        /// The new path.
        to: String,
        /// The change as a unified diff; empty when only moved.
        diff: String,
    },
    /// The file is deleted.
    Delete,
    /// Neither a diff nor the whole content: what the CLI said of the change (a
    /// notebook cell's new source, or only that a file is added or changed).
    Described {
        /// The CLI's words about the change.
        description: String,
    },
}

/// One question for the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Question {
    /// The question's text; answers are keyed by it.
    pub question: String,
    /// A short label for the question, when the CLI gave one.
    pub header: Option<String>,
    /// The choices offered (a typed answer may still be given).
    pub options: Vec<QuestionOption>,
    /// Several options may be chosen.
    pub multi_select: bool,
}

/// One choice offered for a question.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QuestionOption {
    /// The choice, as it is answered.
    pub label: String,
    /// What choosing it means, when the CLI says.
    pub description: Option<String>,
}

/// What "allow always" allows, offered by the provider for a request: a sentence such
/// as "allow the Bash command `ls -la` for the rest of this run".
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AlwaysOption {
    /// The sentence a person reads (`allow … for the rest of this run`).
    pub sentence: String,
}

impl AlwaysOption {
    /// The option that `sentence` describes.
    pub fn new(sentence: impl Into<String>) -> AlwaysOption {
        AlwaysOption {
            sentence: sentence.into(),
        }
    }
}

/// How "for the rest of this run" ends every always-sentence.
pub const FOR_THE_RUN: &str = "for the rest of this run";

impl Ask {
    /// A command from its text: its words are the text split as a POSIX shell would,
    /// when it parses (an unclosed quote leaves them unknown).
    pub fn command(command: &str, cwd: Option<String>, reason: Option<String>) -> Ask {
        Ask::Command {
            command: command.to_string(),
            words: shell_words::split(command).ok(),
            cwd,
            reason,
        }
    }

    /// A command from its argv: the text is the words quoted for a shell.
    pub fn command_from_argv(
        words: Vec<String>,
        cwd: Option<String>,
        reason: Option<String>,
    ) -> Ask {
        Ask::Command {
            command: shell_words::join(&words),
            words: Some(words),
            cwd,
            reason,
        }
    }

    /// Any other tool use, its input kept as compact JSON text.
    pub fn other(tool: &str, subject: Option<&str>, input: &serde_json::Value) -> Ask {
        Ask::Other {
            tool: tool.to_string(),
            subject: subject.filter(|s| !s.trim().is_empty()).map(str::to_string),
            input: json_text(input),
        }
    }

    /// Whether this asks the user something or asks to use a tool.
    pub fn kind(&self) -> RequestKind {
        match self {
            Ask::Question { .. } => RequestKind::Question,
            _ => RequestKind::Permission,
        }
    }

    /// The one line a person wants first: the command, the path, the url, the MCP
    /// arguments, the first question, the subject or else the input. Not clipped nor
    /// folded: a view does that for its place.
    pub fn summary(&self) -> String {
        match self {
            Ask::Command { command, .. } => command.clone(),
            Ask::FileEdit {
                file_path,
                other_files,
                ..
            } => match other_files.len() {
                0 => file_path.clone(),
                1 => format!("{file_path} (+1 file)"),
                n => format!("{file_path} (+{n} files)"),
            },
            Ask::Fetch { url } => url.clone(),
            Ask::McpTool { arguments, .. } => arguments.clone(),
            Ask::Question { questions } => questions
                .first()
                .map(|q| q.question.clone())
                .unwrap_or_default(),
            Ask::Other { subject, input, .. } => subject.clone().unwrap_or_else(|| input.clone()),
        }
    }

    /// The questions of a question ask (none for any other ask).
    pub fn questions(&self) -> &[Question] {
        match self {
            Ask::Question { questions } => questions,
            _ => &[],
        }
    }
}

impl FileChange {
    /// The change in words, for a label: `diff`, `new content`, `moved`, `deleted`.
    pub fn label(&self) -> &'static str {
        match self {
            FileChange::Diff { .. } => "diff",
            FileChange::Content { .. } => "content",
            FileChange::Move { .. } => "moved to",
            FileChange::Delete => "deleted",
            FileChange::Described { .. } => "change",
        }
    }

    /// The text shown under the label (a diff, the content, the new path, …).
    pub fn text(&self) -> String {
        match self {
            FileChange::Diff { diff } => diff.clone(),
            FileChange::Content { content } => content.clone(),
            FileChange::Move { to, diff } if diff.is_empty() => to.clone(),
            FileChange::Move { to, diff } => format!("{to}\n{diff}"),
            FileChange::Delete => "the whole file".to_string(),
            FileChange::Described { description } => description.clone(),
        }
    }
}

/// A JSON value as compact text (`null` for nothing at all).
pub fn json_text(value: &serde_json::Value) -> String {
    value.to_string()
}

/// The change of an edit that replaces `old` with `new` in `path`, as a unified diff of
/// that text (its line numbers count from the start of `old`, not of the file: the CLIs
/// send only the text replaced).
pub fn replacement_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(path, path)
        .to_string()
}

/// `text` in backquotes for an always-sentence, cut to one short line.
pub fn quoted_code(text: &str) -> String {
    let line = crate::text::one_line(text);
    format!("`{}`", crate::text::clip(&line, 80))
}

impl Ask {
    /// Redacts, in place, every field a person or the model wrote (commands, paths,
    /// contents, questions, inputs); tool and server names stay (see
    /// [`super::ProviderEvent::redact`]).
    pub fn redact(&mut self, redactor: &Redactor) {
        match self {
            Ask::Command {
                command,
                words,
                cwd,
                reason,
            } => {
                redactor.redact_string(command);
                for word in words.iter_mut().flatten() {
                    redactor.redact_string(word);
                }
                redactor.redact_opt(cwd);
                redactor.redact_opt(reason);
            }
            Ask::FileEdit {
                file_path,
                change,
                other_files,
            } => {
                redactor.redact_string(file_path);
                change.redact(redactor);
                for EditedFile { file_path, change } in other_files {
                    redactor.redact_string(file_path);
                    change.redact(redactor);
                }
            }
            Ask::Fetch { url } => {
                redactor.redact_string(url);
            }
            Ask::McpTool {
                server: _,
                tool: _,
                arguments,
            } => {
                redactor.redact_string(arguments);
            }
            Ask::Question { questions } => {
                for Question {
                    question,
                    header,
                    options,
                    multi_select: _,
                } in questions
                {
                    redactor.redact_string(question);
                    redactor.redact_opt(header);
                    for QuestionOption { label, description } in options {
                        redactor.redact_string(label);
                        redactor.redact_opt(description);
                    }
                }
            }
            Ask::Other {
                tool: _,
                subject,
                input,
            } => {
                redactor.redact_opt(subject);
                redactor.redact_string(input);
            }
        }
    }
}

impl FileChange {
    /// Redacts, in place, the change's text (see [`Ask::redact`]).
    pub fn redact(&mut self, redactor: &Redactor) {
        match self {
            FileChange::Diff { diff } => {
                redactor.redact_string(diff);
            }
            FileChange::Content { content } => {
                redactor.redact_string(content);
            }
            FileChange::Move { to, diff } => {
                redactor.redact_string(to);
                redactor.redact_string(diff);
            }
            FileChange::Delete => {}
            FileChange::Described { description } => {
                redactor.redact_string(description);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_get_their_words_when_the_text_parses() {
        let table: Vec<(&str, Option<Vec<&str>>)> = vec![
            ("ls -la", Some(vec!["ls", "-la"])),
            (
                "/bin/bash -lc 'touch x'",
                Some(vec!["/bin/bash", "-lc", "touch x"]),
            ),
            ("echo \"a b\" > c", Some(vec!["echo", "a b", ">", "c"])),
            ("echo 'unclosed", None),
            ("", Some(vec![])),
        ];
        for (text, words) in table {
            let Ask::Command {
                command,
                words: got,
                ..
            } = Ask::command(text, None, None)
            else {
                panic!("a command");
            };
            assert_eq!(command, text);
            assert_eq!(
                got,
                words.map(|w| w.into_iter().map(str::to_string).collect()),
                "{text}"
            );
        }
        let argv = vec![
            "git".to_string(),
            "commit".into(),
            "-m".into(),
            "a b".into(),
        ];
        assert_eq!(
            Ask::command_from_argv(argv.clone(), None, None),
            Ask::Command {
                command: "git commit -m 'a b'".into(),
                words: Some(argv),
                cwd: None,
                reason: None,
            }
        );
    }

    #[test]
    fn the_summary_is_what_a_person_wants_first() {
        let question = |text: &str| Question {
            question: text.into(),
            header: None,
            options: vec![],
            multi_select: false,
        };
        let edit = |other_files: Vec<EditedFile>| Ask::FileEdit {
            file_path: "src/main.rs".into(),
            change: FileChange::Delete,
            other_files,
        };
        let more = EditedFile {
            file_path: "b".into(),
            change: FileChange::Delete,
        };
        let table: Vec<(Ask, &str)> = vec![
            (
                Ask::command("ls /tmp", None, Some("list".into())),
                "ls /tmp",
            ),
            (edit(vec![]), "src/main.rs"),
            (edit(vec![more.clone()]), "src/main.rs (+1 file)"),
            (edit(vec![more.clone(), more]), "src/main.rs (+2 files)"),
            (
                Ask::Fetch {
                    url: "https://example.com".into(),
                },
                "https://example.com",
            ),
            (
                Ask::McpTool {
                    server: "gh".into(),
                    tool: "issue".into(),
                    arguments: r#"{"n":1}"#.into(),
                },
                r#"{"n":1}"#,
            ),
            (
                Ask::Question {
                    questions: vec![question("Which?"), question("Why?")],
                },
                "Which?",
            ),
            (Ask::Question { questions: vec![] }, ""),
            (
                Ask::other("Grep", Some("TODO"), &json!({"pattern": "TODO"})),
                "TODO",
            ),
            (
                Ask::other("TodoWrite", Some("  "), &json!({"todos": []})),
                r#"{"todos":[]}"#,
            ),
        ];
        for (ask, summary) in table {
            assert_eq!(ask.summary(), summary, "{ask:?}");
        }
    }

    #[test]
    fn only_a_question_is_a_question() {
        assert_eq!(
            Ask::Question { questions: vec![] }.kind(),
            RequestKind::Question
        );
        assert_eq!(
            Ask::command("ls", None, None).kind(),
            RequestKind::Permission
        );
        assert_eq!(
            Ask::other("x", None, &serde_json::Value::Null).kind(),
            RequestKind::Permission
        );
    }

    #[test]
    fn the_json_shape_keeps_the_public_keys() {
        let command = serde_json::to_value(Ask::command("ls -la", Some("/w".into()), None))
            .expect("serializes");
        assert_eq!(
            command,
            json!({"type": "command", "command": "ls -la", "words": ["ls", "-la"],
                   "cwd": "/w", "reason": null})
        );
        let edit = serde_json::to_value(Ask::FileEdit {
            file_path: "a.rs".into(),
            change: FileChange::Content {
                content: "x".into(),
            },
            other_files: vec![],
        })
        .expect("serializes");
        assert_eq!(
            edit,
            json!({"type": "file_edit", "file_path": "a.rs",
                   "change": {"type": "content", "content": "x"}})
        );
        let question = Ask::Question {
            questions: vec![Question {
                question: "Which?".into(),
                header: Some("DB".into()),
                options: vec![QuestionOption {
                    label: "SQLite".into(),
                    description: None,
                }],
                multi_select: true,
            }],
        };
        let value = serde_json::to_value(&question).expect("serializes");
        assert_eq!(value["questions"][0]["question"], "Which?");
        // And back: the control socket and `show` read it again.
        let back: Ask = serde_json::from_value(value).expect("deserializes");
        assert_eq!(back, question);
    }
}
