//! The prompts drover itself writes: the first turn (task + context + the request for a
//! `## Result` block) and the one short retry turn when the block is missing. The text
//! lives in `assets/prompts/`.

use crate::spec::Spec;

const FIRST_TURN: &str = include_str!("../../../../../assets/prompts/first-turn.md");
const RESULT_RETRY: &str = include_str!("../../../../../assets/prompts/result-retry.md");
const RESUME: &str = include_str!("../../../../../assets/prompts/resume.md");

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

/// The turn `drover resume` sends when the user gave no prompt of their own.
pub fn resume() -> String {
    RESUME.trim_end().to_string()
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
    fn previews_are_one_short_line() {
        let p = preview(&"line one\nline two ".repeat(100));
        assert!(!p.contains('\n'));
        assert!(p.chars().count() <= 200);
    }
}
