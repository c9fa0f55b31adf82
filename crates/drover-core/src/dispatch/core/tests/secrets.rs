//! Secrets at the core's boundary (docs/ARCHITECTURE.md §"Secrets"): a provider event's
//! text is scanned once, as it comes in, and a usage event never; every op the core
//! hands the writer (which stores it as given) holds no secret.

use super::*;
use crate::redact::scans;

/// A GitHub token's shape (gitleaks' `github-pat`).
const KEY: &str = "ghp_R4nd0mT0k3nF0rT3st1ngDr0v3rXyZ123456";

/// Everything the writer is handed, as text.
fn handed_to_writer(out: &Out) -> String {
    out.ops.iter().map(|op| format!("{op:?}\n")).collect()
}

fn only_a_transcript_entry(out: &Out) -> bool {
    matches!(out.ops.as_slice(), [WriteOp::AppendEvent(e)] if e.kind == "transcript")
}

#[test]
fn an_agent_message_is_scanned_once_and_a_usage_event_never() {
    let mut h = Harness::new("");
    let id = h.running();
    // The turn's first words move its live state; the next are a transcript entry alone.
    h.provider(
        &id,
        ProviderEvent::AssistantText {
            text: "looking".into(),
        },
    );

    let before = scans();
    let out = h.provider(
        &id,
        ProviderEvent::AssistantText {
            text: format!("pushing with {KEY} now"),
        },
    );
    assert!(only_a_transcript_entry(&out), "{:?}", out.ops);
    assert_eq!(scans() - before, 1, "one pass, at intake; none at commit");
    let stored = handed_to_writer(&out);
    assert!(!stored.contains(KEY), "{stored}");
    assert!(stored.contains("pushing with [redacted] now"), "{stored}");
    assert!(!h.core.runs[&id].transcript.lines().any(|l| l.contains(KEY)));

    let before = scans();
    let out = h.provider(
        &id,
        ProviderEvent::Usage {
            model: Some("sim-standard".into()),
            tokens: Tokens {
                input: 1_000,
                output: 20,
                ..Tokens::default()
            },
        },
    );
    assert!(only_a_transcript_entry(&out), "{:?}", out.ops);
    assert_eq!(scans() - before, 0, "a usage event holds no text");
}

#[test]
fn what_the_core_writes_besides_provider_events_is_redacted_before_the_writer() {
    let mut h = Harness::new("");
    // The task (the run's row and spec).
    let out = h.dispatch_with(|s| s.task = format!("deploy with {KEY}"));
    let id = out.run().head.run_id;
    let stored = handed_to_writer(&out);
    assert!(!stored.contains(KEY), "{stored}");
    assert!(stored.contains("deploy with [redacted]"), "{stored}");
    h.provider(&id, ProviderEvent::Ready { version: None });
    // A tool call's command and the CLI's last stderr line, in the note its exit leaves.
    let out = h.provider(
        &id,
        ProviderEvent::ToolStarted {
            tool_use_id: "toolu_1".into(),
            name: "Bash".into(),
            ask: Ask::command(
                &format!("git push https://{KEY}@github.com/o/r"),
                None,
                None,
            ),
        },
    );
    let stored = handed_to_writer(&out);
    assert!(!stored.contains(KEY), "{stored}");
    let out = h.provider(
        &id,
        ProviderEvent::Exited {
            code: Some(1),
            signal: None,
            stderr_tail: format!("fatal: bad credentials {KEY}"),
        },
    );
    let stored = handed_to_writer(&out);
    assert!(!stored.contains(KEY), "{stored}");
    assert!(stored.contains("[redacted]"), "{stored}");
    assert!(
        !out.notes().iter().any(|n| n.contains(KEY)),
        "{:?}",
        out.notes()
    );
}
