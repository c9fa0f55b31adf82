//! How drover's permission policy and capability map onto Claude Code (docs/ARCHITECTURE.md
//! §"Permission prompts").
//!
//! Pure. What must stay true:
//! - `ask` runs the CLI in permission mode `default`, so every tool use that is not
//!   already allowed by the user's own settings comes to drover as a `can_use_tool`
//!   request and becomes a prompt;
//! - `restricted` never prompts and never widens what the CLI allows: mode `dontAsk`
//!   denies, inside the CLI, every tool use that would have asked (only tools the
//!   user's settings already allow run). Should a request come anyway, it is denied;
//! - `auto` never prompts: mode `acceptEdits` lets file edits through, and every request
//!   that still comes (commands, fetches) is allowed. `bypassPermissions` is not used:
//!   the CLI refuses it when running as root, and it would also skip the CLI's deny
//!   rules. A question to the user cannot be answered without a user, so it is denied
//!   with a message telling the model to decide itself;
//! - `read-only` removes the tools that write or execute; `workspace` and `full` add no
//!   flag (the CLI's own rules and the permission mode decide).

use serde_json::Value;

use crate::providers::{PermissionAnswer, RequestKind};
use crate::spec::{Capability, PermissionPolicy};

/// The tool name under which the CLI asks the user a question.
pub const QUESTION_TOOL: &str = "AskUserQuestion";

/// Tools removed under `read-only`: every built-in tool that writes files or runs
/// commands. (Not `MultiEdit`: CLI 2.1.197 warns on stderr that no such tool exists.)
pub const WRITE_TOOLS: [&str; 4] = ["Bash", "Edit", "Write", "NotebookEdit"];

/// The message sent when a question comes under a policy without prompts.
pub const NO_ONE_TO_ASK: &str = "No one can answer questions during this run. Make the \
     most reasonable choice yourself and say which in your result, or end with status \
     needs_input and your question.";

/// The message sent when a tool use is asked for under the `restricted` policy.
pub const RESTRICTED_DENIAL: &str =
    "Not allowed: this run's permission policy is restricted (no prompts, no new permissions).";

/// The `--permission-mode` for a policy.
pub fn permission_mode(policy: PermissionPolicy) -> &'static str {
    match policy {
        PermissionPolicy::Ask => "default",
        PermissionPolicy::Restricted => "dontAsk",
        PermissionPolicy::Auto => "acceptEdits",
    }
}

/// The tools to pass to `--disallowedTools` for a capability.
pub fn disallowed_tools(capability: Capability) -> &'static [&'static str] {
    match capability {
        Capability::ReadOnly => &WRITE_TOOLS,
        Capability::Workspace | Capability::Full => &[],
    }
}

/// The answer given without asking anyone, or `None` when the request must be shown
/// to the user (the `ask` policy).
pub fn unattended_answer(policy: PermissionPolicy, kind: RequestKind) -> Option<PermissionAnswer> {
    let deny = |message: &str| PermissionAnswer::Deny {
        message: Some(message.to_string()),
    };
    match (policy, kind) {
        (PermissionPolicy::Ask, _) => None,
        (PermissionPolicy::Auto, RequestKind::Permission) => {
            Some(PermissionAnswer::Allow { always: false })
        }
        (PermissionPolicy::Auto, RequestKind::Question) => Some(deny(NO_ONE_TO_ASK)),
        (PermissionPolicy::Restricted, _) => Some(deny(RESTRICTED_DENIAL)),
    }
}

/// The permission updates that "allow always" sends: the CLI's own suggestions, each
/// scoped to this session (docs/ARCHITECTURE.md §"Permission prompts": "allow always" lasts
/// for the run's session; a suggestion's own destination, often `localSettings`, would
/// write the rule into the project's settings file). `None` when there is nothing to apply.
pub fn session_permissions(suggestions: &Value) -> Option<Value> {
    let list = suggestions.as_array()?;
    let scoped: Vec<Value> = list
        .iter()
        .filter_map(|s| {
            let mut s = s.as_object()?.clone();
            s.insert("destination".into(), Value::String("session".into()));
            Some(Value::Object(s))
        })
        .collect();
    (!scoped.is_empty()).then_some(Value::Array(scoped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policy_to_permission_mode() {
        let table = [
            (PermissionPolicy::Ask, "default"),
            (PermissionPolicy::Restricted, "dontAsk"),
            (PermissionPolicy::Auto, "acceptEdits"),
        ];
        for (policy, mode) in table {
            assert_eq!(permission_mode(policy), mode, "{policy:?}");
        }
        // Never the mode the CLI refuses as root.
        for policy in PermissionPolicy::ALL {
            assert_ne!(permission_mode(policy), "bypassPermissions");
        }
    }

    #[test]
    fn capability_to_disallowed_tools() {
        let table: [(Capability, &[&str]); 3] = [
            (
                Capability::ReadOnly,
                &["Bash", "Edit", "Write", "NotebookEdit"],
            ),
            (Capability::Workspace, &[]),
            (Capability::Full, &[]),
        ];
        for (capability, tools) in table {
            assert_eq!(disallowed_tools(capability), tools, "{capability:?}");
        }
    }

    #[test]
    fn unattended_answers_by_policy_and_kind() {
        let deny = |m: &str| {
            Some(PermissionAnswer::Deny {
                message: Some(m.to_string()),
            })
        };
        let table = [
            (PermissionPolicy::Ask, RequestKind::Permission, None),
            (PermissionPolicy::Ask, RequestKind::Question, None),
            (
                PermissionPolicy::Auto,
                RequestKind::Permission,
                Some(PermissionAnswer::Allow { always: false }),
            ),
            (
                PermissionPolicy::Auto,
                RequestKind::Question,
                deny(NO_ONE_TO_ASK),
            ),
            (
                PermissionPolicy::Restricted,
                RequestKind::Permission,
                deny(RESTRICTED_DENIAL),
            ),
            (
                PermissionPolicy::Restricted,
                RequestKind::Question,
                deny(RESTRICTED_DENIAL),
            ),
        ];
        for (policy, kind, expected) in table {
            assert_eq!(
                unattended_answer(policy, kind),
                expected,
                "{policy:?} {kind:?}"
            );
        }
    }

    #[test]
    fn allow_always_scopes_suggestions_to_the_session() {
        let suggestions = json!([
            {"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],
             "behavior":"allow","destination":"localSettings"},
            {"type":"addDirectories","directories":["/tmp"]},
            "not an object"
        ]);
        assert_eq!(
            session_permissions(&suggestions),
            Some(json!([
                {"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls /tmp"}],
                 "behavior":"allow","destination":"session"},
                {"type":"addDirectories","directories":["/tmp"],"destination":"session"}
            ]))
        );
        assert_eq!(session_permissions(&json!([])), None);
        assert_eq!(session_permissions(&Value::Null), None);
    }
}
