//! The prompts drover itself writes: the first turn (task + context + the request for a
//! `## Result` block), the one short retry turn when the block is missing, the turn that
//! continues a turn a restart cut short, the wrap-up turn before a limit, and the turn that carries answers given after a
//! restart to the run's session. The text lives in `assets/prompts/`.
//!
//! What must stay true: none of them speaks for the user. The resume turn is sent only for
//! a turn that was in flight, and says so; the answers turn says what was asked and what
//! the user (or the timeout) answered, in their words.

use crate::spec::Spec;

const FIRST_TURN: &str = include_str!("../../../../../assets/prompts/first-turn.md");
const RESULT_RETRY: &str = include_str!("../../../../../assets/prompts/result-retry.md");
const RESUME: &str = include_str!("../../../../../assets/prompts/resume.md");
const WRAP_UP: &str = include_str!("../../../../../assets/prompts/wrap-up.md");
const ANSWERS: &str = include_str!("../../../../../assets/prompts/answers.md");

/// The first prompt of a run. Runs with an output schema are asked for JSON instead of
/// the block.
pub fn first_turn(spec: &Spec) -> String {
    let context = match &spec.context {
        Some(c) if !c.trim().is_empty() => format!("\nContext:\n{c}\n"),
        _ => String::new(),
    };
    if let Some(schema) = &spec.output_schema {
        return format!(
            "{}\n{context}\nAnswer with a single JSON value that matches this JSON schema, \
             and nothing else:\n{schema}\n",
            spec.task
        );
    }
    FIRST_TURN
        .replace("{task}", &spec.task)
        .replace("{context}", &context)
}

/// The short turn that asks again for a missing `## Result` block.
pub fn result_retry() -> String {
    RESULT_RETRY.to_string()
}

/// The one turn asking a run to stop working and write its result block now
/// (docs/ARCHITECTURE.md §"Wrap up, then stop"); `why` says why, in drover's words. A run
/// with an output schema is asked for its JSON answer instead.
pub fn wrap_up(why: &str, schema: Option<&serde_json::Value>) -> String {
    if let Some(schema) = schema {
        return format!(
            "drover is ending this run soon: {why}. Stop working now and answer with a \
             single JSON value that matches this JSON schema, and nothing else:\n{schema}\n"
        );
    }
    WRAP_UP.replace("{why}", why).trim_end().to_string()
}

/// The turn `drover resume` sends, when the user gave no prompt of their own, to a run
/// whose turn a restart cut short.
pub fn resume() -> String {
    RESUME.trim_end().to_string()
}

/// The turn that tells a run's resumed session the answers to what it asked before a
/// restart: one line per request ([`answered`]).
pub fn answers(lines: &[String]) -> String {
    ANSWERS
        .replace("{answers}", &lines.join("\n"))
        .trim_end()
        .to_string()
}

/// One line of [`answers`]: what was asked (a tool's use, or a question) and how it was
/// answered (`how`, as [`super::answers::describe_answer`] words it, by `who`).
pub fn answered(
    request: &crate::providers::PermissionRequest,
    answer: &crate::providers::PermissionAnswer,
    who: &str,
) -> String {
    use crate::providers::{PermissionAnswer, RequestKind};
    let what = match request.kind {
        RequestKind::Permission => format!(
            "You asked to use {}: `{}`",
            request.tool,
            crate::text::one_line(&request.ask.summary())
        ),
        RequestKind::Question => {
            let questions: Vec<String> = request
                .ask
                .questions()
                .iter()
                .map(|q| crate::text::one_line(&q.question))
                .collect();
            format!("You asked the user: {}", questions.join(" / "))
        }
    };
    let by_whom = if who == "timeout" {
        "no answer came in time, so it is"
    } else {
        "the user"
    };
    let how = match answer {
        PermissionAnswer::Allow { .. } if request.kind == RequestKind::Question => {
            format!("{by_whom} let you go on without an answer")
        }
        PermissionAnswer::Allow { always: false } => format!("{by_whom} allowed it"),
        PermissionAnswer::Allow { always: true } => {
            format!("{by_whom} allowed it (and the same use again, for this run)")
        }
        PermissionAnswer::Deny { .. } if who == "timeout" => format!("{by_whom} denied"),
        PermissionAnswer::Deny { message: None } => format!("{by_whom} denied it"),
        PermissionAnswer::Deny { message: Some(m) } => {
            format!("{by_whom} denied it: {}", crate::text::one_line(m))
        }
        PermissionAnswer::Answer { answers } => {
            let given: Vec<String> = match answers.len() {
                1 => answers.values().map(|a| crate::text::one_line(a)).collect(),
                _ => answers
                    .iter()
                    .map(|(q, a)| {
                        format!(
                            "{} → {}",
                            crate::text::one_line(q),
                            crate::text::one_line(a)
                        )
                    })
                    .collect(),
            };
            format!("{by_whom} answered: {}", given.join("; "))
        }
    };
    format!("- {what} — {how}.")
}

/// A one-line preview of a prompt for the turn record.
pub fn preview(prompt: &str) -> String {
    crate::text::clip(&crate::text::one_line(prompt), 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result_contract::parse_result;

    fn spec(task: &str, context: Option<&str>) -> Spec {
        let mut s: Spec = serde_json::from_value(serde_json::json!({
            "provider": "sim", "model": null, "effort": null, "cwd": "/tmp", "task": task,
            "context": context, "title": "t", "tags": [], "capability": "workspace",
            "policy": "ask", "max_minutes": 45, "budget_usd": 5.0, "idle_timeout_secs": 1200,
            "max_turns": 6, "output_schema": null, "workflow_id": null, "parent_run": null,
            "idempotency_key": null, "queue_if_busy": true, "scenario": null, "class": null,
            "clamps": []
        }))
        .unwrap();
        s.context = context.map(str::to_string);
        s
    }

    #[test]
    fn the_first_turn_wraps_task_and_context_and_asks_for_the_block() {
        let p = first_turn(&spec("Fix the flaky test", Some("CI log: boom")));
        assert!(p.starts_with("Fix the flaky test\n"));
        assert!(p.contains("Context:\nCI log: boom"));
        assert!(p.contains("## Result\nstatus: done | blocked | needs_input"));
        // The template itself is not mistaken for an answer: its status is ambiguous.
        assert_eq!(parse_result(&p).status, None);
    }

    #[test]
    fn no_context_leaves_no_empty_heading() {
        let p = first_turn(&spec("Do it", None));
        assert!(!p.contains("Context:"));
        assert!(!p.contains("{context}"));
    }

    #[test]
    fn a_schema_run_is_asked_for_json() {
        let mut s = spec("List files", None);
        s.output_schema = Some(serde_json::json!({"type": "object"}));
        let p = first_turn(&s);
        assert!(p.contains("single JSON value"));
        assert!(!p.contains("## Result"));
    }

    #[test]
    fn the_resume_turn_says_a_restart_cut_the_last_turn() {
        assert!(resume().starts_with("drover was restarted during your last turn; continue it"));
        assert_eq!(parse_result(&resume()).status, None);
    }

    #[test]
    fn the_answers_turn_says_what_was_asked_and_answered() {
        use crate::providers::{Ask, PermissionAnswer, PermissionRequest, Question, RequestKind};
        let bash = PermissionRequest {
            request_id: "r1".into(),
            kind: RequestKind::Permission,
            tool: "Bash".into(),
            ask: Ask::command("ls -la", None, Some("list".into())),
            always: None,
            tool_use_id: None,
            blocked_path: None,
        };
        let question = PermissionRequest {
            request_id: "r2".into(),
            kind: RequestKind::Question,
            tool: "AskUserQuestion".into(),
            ask: Ask::Question {
                questions: vec![Question {
                    question: "Which database?".into(),
                    header: None,
                    options: Vec::new(),
                    multi_select: false,
                }],
            },
            always: None,
            tool_use_id: None,
            blocked_path: None,
        };
        let cases = [
            (
                &bash,
                PermissionAnswer::Allow { always: false },
                "user",
                "- You asked to use Bash: `ls -la` — the user allowed it.",
            ),
            (
                &bash,
                PermissionAnswer::Deny {
                    message: Some("not on main".into()),
                },
                "user",
                "- You asked to use Bash: `ls -la` — the user denied it: not on main.",
            ),
            (
                &bash,
                PermissionAnswer::Deny {
                    message: Some("no answer within 10 minutes".into()),
                },
                "timeout",
                "- You asked to use Bash: `ls -la` — no answer came in time, so it is denied.",
            ),
            (
                &question,
                PermissionAnswer::Answer {
                    answers: [("Which database?".to_string(), "SQLite".to_string())]
                        .into_iter()
                        .collect(),
                },
                "user",
                "- You asked the user: Which database? — the user answered: SQLite.",
            ),
        ];
        for (request, answer, who, line) in cases {
            assert_eq!(answered(request, &answer, who), line);
        }
        let turn = answers(&[answered(
            &bash,
            &PermissionAnswer::Allow { always: false },
            "user",
        )]);
        assert!(turn.starts_with("- You asked to use Bash: `ls -la` — the user allowed it.\n\n"));
        assert!(turn.contains("## Result"));
        assert_eq!(parse_result(&turn).status, None);
    }

    #[test]
    fn previews_are_one_short_line() {
        let p = preview(&"line one\nline two ".repeat(100));
        assert!(!p.contains('\n'));
        assert!(p.chars().count() <= 200);
    }
}
