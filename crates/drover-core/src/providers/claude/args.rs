//! The command line a Claude Code child is started with.
//!
//! Pure. What must stay true: the child always speaks stream-json both ways with
//! permission requests over stdio (`--permission-prompt-tool stdio`), and the
//! permission mode and tool restrictions always come from the run's policy and
//! capability ([`super::policy`]); nothing else widens them.

use crate::providers::{LaunchSpec, MCP_SERVER_NAME, McpServer};

use super::policy;

/// The protocol flags: stream-json both ways, permission requests over stdio.
pub const PROTOCOL_FLAGS: [&str; 7] = [
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--permission-prompt-tool",
    "stdio",
];

/// The arguments after the executable: the configured prefix, then the protocol flags,
/// then the run's own.
pub fn build_args(spec: &LaunchSpec) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend(PROTOCOL_FLAGS.map(String::from));
    args.extend(["--permission-mode", policy::permission_mode(spec.policy)].map(String::from));
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    if let Some(effort) = &spec.effort {
        args.push("--effort".into());
        args.push(effort.clone());
    }
    if let Some(session) = &spec.resume_session {
        // One argument, so an id can never be taken for a flag.
        args.push(format!("--resume={session}"));
    }
    if let Some(server) = &spec.mcp {
        args.push("--mcp-config".into());
        args.push(mcp_config(server).to_string());
    }
    let disallowed = policy::disallowed_tools(spec.capability);
    if !disallowed.is_empty() {
        args.push("--disallowedTools".into());
        args.push(disallowed.join(","));
    }
    args
}

/// Claude Code's interactive interface on `session` (a take-over): the configured
/// prefix, then the session, and the same permission mode, model and tool limits the
/// run's supervised child gets — only the protocol flags differ.
pub fn interactive_args(spec: &LaunchSpec, session: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.push(format!("--resume={session}"));
    args.extend(["--permission-mode", policy::permission_mode(spec.policy)].map(String::from));
    if let Some(model) = &spec.model {
        args.push("--model".into());
        args.push(model.clone());
    }
    if let Some(server) = &spec.mcp {
        args.push("--mcp-config".into());
        args.push(mcp_config(server).to_string());
    }
    let disallowed = policy::disallowed_tools(spec.capability);
    if !disallowed.is_empty() {
        args.push("--disallowedTools".into());
        args.push(disallowed.join(","));
    }
    args
}

/// Claude Code's `--mcp-config` JSON for drover's MCP server.
fn mcp_config(server: &McpServer) -> serde_json::Value {
    serde_json::json!({
        "mcpServers": {
            MCP_SERVER_NAME: {
                "type": "stdio",
                "command": server.command.display().to_string(),
                "args": server.args,
                "env": server.env,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Capability, PermissionPolicy};
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn spec(policy: PermissionPolicy, capability: Capability) -> LaunchSpec {
        LaunchSpec::for_tests("claude-code", "claude", policy, capability)
    }

    fn with_protocol(rest: &[&str]) -> Vec<String> {
        PROTOCOL_FLAGS
            .iter()
            .chain(rest)
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn policy_and_capability_table() {
        use Capability::*;
        use PermissionPolicy::*;
        let table: Vec<(PermissionPolicy, Capability, Vec<&str>)> = vec![
            (Ask, Workspace, vec!["--permission-mode", "default"]),
            (Ask, Full, vec!["--permission-mode", "default"]),
            (
                Ask,
                ReadOnly,
                vec![
                    "--permission-mode",
                    "default",
                    "--disallowedTools",
                    "Bash,Edit,Write,NotebookEdit",
                ],
            ),
            (Restricted, Workspace, vec!["--permission-mode", "dontAsk"]),
            (
                Restricted,
                ReadOnly,
                vec![
                    "--permission-mode",
                    "dontAsk",
                    "--disallowedTools",
                    "Bash,Edit,Write,NotebookEdit",
                ],
            ),
            (Auto, Workspace, vec!["--permission-mode", "acceptEdits"]),
            (Auto, Full, vec!["--permission-mode", "acceptEdits"]),
            (
                Auto,
                ReadOnly,
                vec![
                    "--permission-mode",
                    "acceptEdits",
                    "--disallowedTools",
                    "Bash,Edit,Write,NotebookEdit",
                ],
            ),
        ];
        for (policy, capability, rest) in table {
            assert_eq!(
                build_args(&spec(policy, capability)),
                with_protocol(&rest),
                "{policy:?} {capability:?}"
            );
        }
    }

    #[test]
    fn never_skips_permissions() {
        for policy in PermissionPolicy::ALL {
            for capability in Capability::ALL {
                let args = build_args(&spec(policy, capability));
                assert!(!args.iter().any(|a| a.contains("dangerously")), "{args:?}");
                assert!(!args.iter().any(|a| a == "bypassPermissions"), "{args:?}");
            }
        }
    }

    #[test]
    fn prefix_model_effort_and_resume() {
        let mut s = spec(PermissionPolicy::Ask, Capability::Workspace);
        s.args = vec!["--debug-to-stderr".into()];
        s.model = Some("claude-sonnet-4-5".into());
        s.effort = Some("high".into());
        s.resume_session = Some("-odd-session".into());
        let mut expected = vec!["--debug-to-stderr".to_string()];
        expected.extend(with_protocol(&[
            "--permission-mode",
            "default",
            "--model",
            "claude-sonnet-4-5",
            "--effort",
            "high",
            "--resume=-odd-session",
        ]));
        assert_eq!(build_args(&s), expected);
    }

    #[test]
    fn drovers_mcp_server_is_configured_when_offered() {
        let mut s = spec(PermissionPolicy::Ask, Capability::Workspace);
        assert!(!build_args(&s).contains(&"--mcp-config".to_string()));
        s.mcp = Some(crate::providers::McpServer {
            command: PathBuf::from("/bin/drover"),
            args: vec!["mcp".into()],
            env: BTreeMap::from([("DROVER_RUN_ID".to_string(), "r1".to_string())]),
        });
        let args = build_args(&s);
        let at = args
            .iter()
            .position(|a| a == "--mcp-config")
            .expect("--mcp-config");
        let config: serde_json::Value = serde_json::from_str(&args[at + 1]).unwrap();
        let drover = &config["mcpServers"]["drover"];
        assert_eq!(drover["command"], "/bin/drover");
        assert_eq!(drover["args"], serde_json::json!(["mcp"]));
        assert_eq!(drover["env"]["DROVER_RUN_ID"], "r1");
    }
}
