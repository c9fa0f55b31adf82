//! The command lines a Codex child is started with, and the sandbox a run gets.
//!
//! Pure. What must stay true: the sandbox always comes from the run's capability
//! ([`sandbox`]), in both modes; nothing here ever passes a flag that bypasses approvals
//! or the sandbox (`--dangerously-bypass-approvals-and-sandbox`, `--full-auto`).
//!
//! Policy `ask` runs `codex app-server` (the mode with approvals). Policies `restricted`
//! and `auto` run one `codex exec --json` per turn: exec never asks (its approval policy
//! is forced to `never`), so both get the capability's sandbox and differ only in what
//! drover does with a request that still arrives (none does in exec mode). `auto` is not
//! widened to `danger-full-access`: "no prompts" is what exec already gives, and the
//! capability stays the bound on what the run may touch.

use crate::providers::{LaunchSpec, MCP_SERVER_NAME};
use crate::spec::Capability;

/// Codex's sandbox mode for a capability.
pub fn sandbox(capability: Capability) -> &'static str {
    match capability {
        Capability::ReadOnly => "read-only",
        Capability::Workspace => "workspace-write",
        Capability::Full => "danger-full-access",
    }
}

/// `codex app-server`, after the configured prefix.
pub fn app_server_args(spec: &LaunchSpec) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend(mcp_overrides(spec));
    args.push("app-server".into());
    args
}

/// `-c mcp_servers.drover.…` overrides (before the subcommand: codex's own options) that
/// configure drover's MCP server, when the run is offered it.
fn mcp_overrides(spec: &LaunchSpec) -> Vec<String> {
    let Some(server) = &spec.mcp else {
        return Vec::new();
    };
    let key = format!("mcp_servers.{MCP_SERVER_NAME}");
    let args = toml::Value::Array(
        server
            .args
            .iter()
            .map(|a| toml::Value::String(a.clone()))
            .collect(),
    );
    let env: toml::Table = server
        .env
        .iter()
        .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
        .collect();
    let env = toml::Value::Table(env);
    vec![
        "-c".into(),
        format!(
            "{key}.command={}",
            toml_string(&server.command.display().to_string())
        ),
        "-c".into(),
        format!("{key}.args={args}"),
        "-c".into(),
        format!("{key}.env={}", inline_table(&env)),
    ]
}

/// A TOML table as one inline table (`{ A = "x", B = "y" }`).
fn inline_table(value: &toml::Value) -> String {
    let toml::Value::Table(table) = value else {
        return value.to_string();
    };
    let fields: Vec<String> = table
        .iter()
        .map(|(k, v)| format!("{} = {v}", toml_string(k)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// One `codex exec --json` turn: a new thread, or a follow-up on `thread` (`exec …
/// resume THREAD`). The prompt comes last, after `--`, so it can never be read as a flag.
pub fn exec_args(spec: &LaunchSpec, thread: Option<&str>, prompt: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend(mcp_overrides(spec));
    args.extend(["exec", "--json", "--skip-git-repo-check"].map(String::from));
    if let Some(model) = &spec.model {
        args.push("-m".into());
        args.push(model.clone());
    }
    if let Some(effort) = &spec.effort {
        args.push("-c".into());
        args.push(format!("model_reasoning_effort={}", toml_string(effort)));
    }
    args.push("-s".into());
    args.push(sandbox(spec.capability).into());
    args.push("-C".into());
    args.push(spec.cwd.display().to_string());
    if let Some(thread) = thread {
        args.push("resume".into());
        args.push(thread.to_string());
    }
    args.push("--".into());
    args.push(prompt.to_string());
    args
}

/// Codex's interactive interface on `thread` (a take-over): `resume` without the
/// background daemon (it would outlive the interface), in the run's directory and
/// sandbox, asking for approval in the interface (the user is there).
pub fn resume_args(spec: &LaunchSpec, thread: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend(mcp_overrides(spec));
    args.extend(["resume", "--no-daemon", "-a", "on-request"].map(String::from));
    if let Some(model) = &spec.model {
        args.push("-m".into());
        args.push(model.clone());
    }
    args.push("-s".into());
    args.push(sandbox(spec.capability).into());
    args.push("-C".into());
    args.push(spec.cwd.display().to_string());
    args.push(thread.to_string());
    args
}

/// A TOML basic string (for `-c key=value`, whose value is parsed as TOML).
fn toml_string(value: &str) -> String {
    toml::Value::String(value.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::PermissionPolicy;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn spec(capability: Capability) -> LaunchSpec {
        LaunchSpec::for_tests("codex", "codex", PermissionPolicy::Restricted, capability)
    }

    #[test]
    fn sandbox_follows_the_capability() {
        assert_eq!(sandbox(Capability::ReadOnly), "read-only");
        assert_eq!(sandbox(Capability::Workspace), "workspace-write");
        assert_eq!(sandbox(Capability::Full), "danger-full-access");
    }

    #[test]
    fn exec_new_thread_and_resume() {
        let mut s = spec(Capability::Workspace);
        s.args = vec!["--prefix".into()];
        s.model = Some("gpt-5.5".into());
        assert_eq!(
            exec_args(&s, None, "-do it"),
            [
                "--prefix",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-m",
                "gpt-5.5",
                "-s",
                "workspace-write",
                "-C",
                "/w",
                "--",
                "-do it"
            ]
        );
        s.effort = Some("high".into());
        let args = exec_args(&s, Some("01a2"), "again");
        assert_eq!(
            args[6..],
            [
                "-c",
                "model_reasoning_effort=\"high\"",
                "-s",
                "workspace-write",
                "-C",
                "/w",
                "resume",
                "01a2",
                "--",
                "again"
            ]
        );
    }

    #[test]
    fn never_bypasses_the_sandbox_or_approvals() {
        for capability in Capability::ALL {
            let args = exec_args(&spec(capability), Some("t"), "p");
            assert!(
                !args
                    .iter()
                    .any(|a| a.contains("dangerously") || a == "--full-auto"),
                "{args:?}"
            );
        }
        assert_eq!(
            app_server_args(&spec(Capability::Full)),
            ["app-server".to_string()]
        );
    }

    #[test]
    fn drovers_mcp_server_is_configured_before_the_subcommand_when_offered() {
        let mut s = spec(Capability::Workspace);
        s.mcp = Some(crate::providers::McpServer {
            command: PathBuf::from("/bin/drover"),
            args: vec!["mcp".into()],
            env: BTreeMap::from([("DROVER_RUN_ID".to_string(), "r1".to_string())]),
        });
        for args in [app_server_args(&s), exec_args(&s, None, "go")] {
            let sub = args
                .iter()
                .position(|a| a == "app-server" || a == "exec")
                .expect("a subcommand");
            let overrides: Vec<&String> = args[..sub]
                .iter()
                .filter(|a| a.starts_with("mcp_servers."))
                .collect();
            assert_eq!(overrides.len(), 3, "{args:?}");
            // Each value is TOML, as codex reads it.
            let mut doc = String::new();
            for o in overrides {
                doc.push_str(o);
                doc.push('\n');
            }
            let table: toml::Table = toml::from_str(&doc).expect("valid TOML");
            let drover = &table["mcp_servers"]["drover"];
            assert_eq!(drover["command"].as_str(), Some("/bin/drover"));
            assert_eq!(drover["args"][0].as_str(), Some("mcp"));
            assert_eq!(drover["env"]["DROVER_RUN_ID"].as_str(), Some("r1"));
        }
    }
}
