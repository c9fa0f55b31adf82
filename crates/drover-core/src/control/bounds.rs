//! How big a request may be: every list inside a control-socket request is bounded and
//! its duplicates collapsed before the dispatcher sees it, so no request can make an
//! answer (or the owner's memory) grow with its own repetition.
//!
//! What must stay true: [`check`] is the one place these bounds live; a request over a
//! bound is refused with `REQUEST_TOO_LARGE` and a sentence naming the list and its limit,
//! never trimmed silently; duplicates are collapsed keeping the first occurrence's order.

use crate::dispatch::Request;
use crate::error::{DroverError, ErrorCode};

/// The most run ids one `wait` or `subscribe` may list (a `wait` on a workflow lists none
/// of its runs' ids, however many there are).
pub const MAX_RUN_IDS: usize = 256;
/// The most answers one `respond` may carry (a question's answers).
pub const MAX_ANSWERS: usize = 64;
/// The longest id (run, request) accepted.
pub const MAX_ID_CHARS: usize = 128;
/// The longest path (a rule's repository) accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// The most `wait`s one connection may have pending at once.
pub const MAX_PENDING_WAITS: usize = 16;
/// The longest text a `runs` request may search for.
pub const MAX_SEARCH_CHARS: usize = 200;

/// `request` with duplicates collapsed, or why it is refused.
pub fn check(request: &Request) -> Result<Request, DroverError> {
    let mut request = request.clone();
    match &mut request {
        Request::Wait {
            run_ids, workflow, ..
        } => {
            // Only the ids the client lists: a workflow's runs are looked up by the owner.
            bound_ids("wait", "run_ids", run_ids)?;
            if let Some(workflow) = workflow {
                id_len("workflow", workflow)?;
            }
        }
        Request::Subscribe { run_ids, .. } => bound_ids("subscribe", "run_ids", run_ids)?,
        Request::Respond {
            run_id,
            request_id,
            answer,
        } => {
            id_len("run_id", run_id)?;
            id_len("request_id", request_id)?;
            if let crate::providers::PermissionAnswer::Answer { answers } = answer
                && answers.len() > MAX_ANSWERS
            {
                return Err(too_large(format!(
                    "`respond` carries {} answers; send at most {MAX_ANSWERS}",
                    answers.len()
                )));
            }
        }
        Request::Show { run_id }
        | Request::Transcript { run_id, .. }
        | Request::FollowUp { run_id, .. }
        | Request::Resume { run_id, .. }
        | Request::Wake { run_id }
        | Request::TakeOver { run_id }
        | Request::HandBack { run_id }
        | Request::Stop { run_id }
        | Request::WrapUp { run_id }
        | Request::Complete { run_id }
        | Request::Route { run_id, .. }
        | Request::RouteDecline { run_id }
        | Request::Escalate { run_id, .. }
        | Request::Retry { run_id } => id_len("run_id", run_id)?,
        Request::Remove {
            run_id: Some(run_id),
            ..
        } => id_len("run_id", run_id)?,
        Request::Runs { before, search, .. } => {
            if let Some(before) = before {
                id_len("before", before)?;
            }
            if let Some(search) = search
                && search.chars().count() > MAX_SEARCH_CHARS
            {
                return Err(too_large(format!(
                    "`runs` searches for {} characters; search for at most {MAX_SEARCH_CHARS}",
                    search.chars().count()
                )));
            }
        }
        Request::Search { query, .. } if query.chars().count() > MAX_SEARCH_CHARS => {
            return Err(too_large(format!(
                "`search` searches for {} characters; search for at most {MAX_SEARCH_CHARS}",
                query.chars().count()
            )));
        }
        Request::RuleAdd { rule, answer } => {
            if rule.pattern.chars().count() > crate::rules::MAX_PATTERN_CHARS {
                return Err(too_large(format!(
                    "`rule_add` carries a pattern of {} characters; send at most {}",
                    rule.pattern.chars().count(),
                    crate::rules::MAX_PATTERN_CHARS
                )));
            }
            if let Some(run_id) = &rule.run_id {
                id_len("run_id", run_id)?;
            }
            if rule
                .repository
                .as_ref()
                .is_some_and(|r| r.len() > MAX_PATH_BYTES)
            {
                return Err(too_large(format!(
                    "`rule_add` names a repository path over {MAX_PATH_BYTES} bytes"
                )));
            }
            if let Some(a) = answer {
                id_len("run_id", &a.run_id)?;
                id_len("request_id", &a.request_id)?;
            }
        }
        _ => {}
    }
    Ok(request)
}

fn bound_ids(method: &str, field: &str, ids: &mut Vec<String>) -> Result<(), DroverError> {
    if ids.len() > MAX_RUN_IDS {
        return Err(too_large(format!(
            "`{method}` names {} {field}; name at most {MAX_RUN_IDS} (split the request)",
            ids.len()
        )));
    }
    for id in ids.iter() {
        id_len(field, id)?;
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    Ok(())
}

fn id_len(field: &str, id: &str) -> Result<(), DroverError> {
    if id.chars().count() > MAX_ID_CHARS {
        return Err(too_large(format!(
            "a `{field}` of {} characters is longer than any id drover makes ({MAX_ID_CHARS} at most)",
            id.chars().count()
        )));
    }
    Ok(())
}

fn too_large(message: String) -> DroverError {
    DroverError::new(ErrorCode::RequestTooLarge, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::api::RuleAnswer;
    use crate::rules::{RuleDecision, RuleKind, RuleSpec, Scope};

    fn rule_add(pattern: &str, repository: Option<String>, request_id: &str) -> Request {
        Request::RuleAdd {
            rule: RuleSpec {
                scope: Scope::Everywhere,
                kind: RuleKind::Command,
                pattern: pattern.into(),
                decision: RuleDecision::Allow,
                run_id: None,
                repository,
            },
            answer: Some(RuleAnswer {
                run_id: "r1".into(),
                request_id: request_id.into(),
            }),
        }
    }

    #[test]
    fn a_rule_over_its_bounds_is_refused_before_the_dispatcher() {
        assert!(check(&rule_add("cargo test *", None, "p1")).is_ok());
        let too_long = "x".repeat(crate::rules::MAX_PATTERN_CHARS + 1);
        for request in [
            rule_add(&too_long, None, "p1"),
            rule_add("ls", Some("/".repeat(MAX_PATH_BYTES + 1)), "p1"),
            rule_add("ls", None, &"i".repeat(MAX_ID_CHARS + 1)),
        ] {
            let e = check(&request).unwrap_err();
            assert_eq!(e.code, ErrorCode::RequestTooLarge);
            assert!(
                e.message.contains("send at most") || e.message.contains("over"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_runs_page_names_an_id_and_searches_a_bounded_text() {
        let runs = |before: &str, search: &str| Request::Runs {
            state: None,
            include_removed: false,
            workflow: None,
            limit: Some(50),
            before: Some(before.into()),
            search: Some(search.into()),
        };
        let longest = "é".repeat(MAX_SEARCH_CHARS);
        assert!(check(&runs("r1", &longest)).is_ok());
        let e = check(&runs("r1", &format!("{longest}x"))).unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestTooLarge);
        assert!(e.message.contains("search for at most 200"), "{e}");
        let e = check(&runs(&"r".repeat(MAX_ID_CHARS + 1), "flaky")).unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestTooLarge);
        assert!(e.message.contains("`before`"), "{e}");
    }
}
