//! How an `opencode serve` child is started: its command line, its environment, and
//! where it says it listens.
//!
//! Pure. What must stay true:
//! - the server only ever listens on 127.0.0.1, on the port drover chose;
//! - it is protected by a basic-auth password made for this run (so another local
//!   process cannot drive the run's session), which only drover knows;
//! - the permission rules come from the run's policy and capability
//!   (`OPENCODE_PERMISSION`, merged by OpenCode over its own config): `ask` asks for
//!   edits, commands and fetches, `auto` allows them, `restricted` denies them;
//!   `read-only` denies edits and commands whatever the policy, and every capability but
//!   `full` denies work outside the working directory (OpenCode's `external_directory`,
//!   which would otherwise ask, and be allowed under `auto`). Nothing else widens them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::providers::{LaunchSpec, MCP_SERVER_NAME};
use crate::spec::{Capability, PermissionPolicy};

/// The basic-auth user drover names (OpenCode's default is `opencode`; set explicitly so
/// a user's `OPENCODE_SERVER_USERNAME` cannot get in the way).
pub const SERVER_USER: &str = "opencode";

/// The arguments after the executable: the configured prefix, then `serve` on loopback.
pub fn serve_args(spec: &LaunchSpec, port: u16) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend([
        "serve".to_string(),
        "--hostname".to_string(),
        "127.0.0.1".to_string(),
        "--port".to_string(),
        port.to_string(),
    ]);
    args
}

/// The permission rules for a policy and capability (OpenCode's `permission` config).
pub fn permission_rules(policy: PermissionPolicy, capability: Capability) -> Value {
    let action = match policy {
        PermissionPolicy::Ask => "ask",
        PermissionPolicy::Auto => "allow",
        PermissionPolicy::Restricted => "deny",
    };
    let mut rules = json!({"edit": action, "bash": action, "webfetch": action});
    if capability == Capability::ReadOnly {
        rules["edit"] = json!("deny");
        rules["bash"] = json!("deny");
    }
    // A pattern map, not a word: OpenCode's own rule for its data directory stays.
    rules["external_directory"] = match capability {
        Capability::Full => json!({"*": action}),
        Capability::Workspace | Capability::ReadOnly => json!({"*": "deny"}),
    };
    rules
}

/// The child's added environment: the configured one, then drover's own (which wins).
pub fn serve_env(spec: &LaunchSpec, password: &str) -> BTreeMap<String, String> {
    let mut env = interactive_env(spec);
    env.insert("OPENCODE_SERVER_USERNAME".into(), SERVER_USER.into());
    env.insert("OPENCODE_SERVER_PASSWORD".into(), password.into());
    env
}

/// The arguments after the executable that open OpenCode's own interface (its TUI) on
/// `session`, in the run's directory (its cwd) and model: the configured prefix, then
/// `--session=ID` (one argument, so an id is never read as a flag) and `--model`
/// (docs/ARCHITECTURE.md §"Take-over").
pub fn interactive_args(spec: &LaunchSpec, session: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.push(format!("--session={session}"));
    if let Some(model) = &spec.model {
        args.push(format!("--model={model}"));
    }
    args
}

/// The arguments after the executable that print `session` as JSON
/// (`export SESSION`): what a take-over reads back.
pub fn export_args(spec: &LaunchSpec, session: &str) -> Vec<String> {
    let mut args = spec.args.clone();
    args.extend(["export".to_string(), session.to_string()]);
    args
}

/// The environment of OpenCode's interface as of its server (but the server's password):
/// the configured one, then the permission rules of the run's policy and capability and
/// drover's MCP server, so the interface works within the run's limits and on the same
/// data (OpenCode's database is where the configured `XDG_DATA_HOME` says).
pub fn interactive_env(spec: &LaunchSpec) -> BTreeMap<String, String> {
    let mut env = spec.env.clone();
    env.insert(
        "OPENCODE_PERMISSION".into(),
        permission_rules(spec.policy, spec.capability).to_string(),
    );
    if let Some(server) = &spec.mcp {
        // Inline config, merged over the user's: drover's MCP server as a local one.
        let mut command = vec![server.command.display().to_string()];
        command.extend(server.args.iter().cloned());
        let config = serde_json::json!({
            "mcp": {
                MCP_SERVER_NAME: {
                    "type": "local",
                    "command": command,
                    "environment": server.env,
                    "enabled": true,
                }
            }
        });
        env.insert("OPENCODE_CONFIG_CONTENT".into(), config.to_string());
    }
    env
}

/// The base URL in the server's "listening" line (`opencode server listening on
/// http://127.0.0.1:4096`), when the line is that one and names a loopback address.
pub fn listening_url(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("listening on ")?;
    let url = rest.split_whitespace().next()?.trim_end_matches('/');
    let host_port = url.strip_prefix("http://")?;
    let (host, port) = host_port.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    matches!(host, "127.0.0.1" | "localhost").then(|| format!("http://127.0.0.1:{port}"))
}

/// A password for one run: 32 hex digits from the OS's random source; `None` when the
/// source cannot be read.
pub fn fresh_password() -> Option<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec(policy: PermissionPolicy, capability: Capability) -> LaunchSpec {
        LaunchSpec {
            args: vec!["--print-logs".into()],
            env: BTreeMap::from([
                ("HOME".to_string(), "/h".to_string()),
                ("OPENCODE_SERVER_PASSWORD".to_string(), "theirs".to_string()),
            ]),
            ..LaunchSpec::for_tests("opencode", "opencode", policy, capability)
        }
    }

    #[test]
    fn serve_listens_on_loopback_after_the_configured_prefix() {
        let args = serve_args(&spec(PermissionPolicy::Ask, Capability::Workspace), 41234);
        assert_eq!(
            args,
            [
                "--print-logs",
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                "41234"
            ]
        );
    }

    #[test]
    fn policy_and_capability_to_permission_rules() {
        let table = [
            (
                PermissionPolicy::Ask,
                Capability::Workspace,
                json!({"edit": "ask", "bash": "ask", "webfetch": "ask",
                       "external_directory": {"*": "deny"}}),
            ),
            (
                PermissionPolicy::Ask,
                Capability::Full,
                json!({"edit": "ask", "bash": "ask", "webfetch": "ask",
                       "external_directory": {"*": "ask"}}),
            ),
            (
                PermissionPolicy::Auto,
                Capability::Full,
                json!({"edit": "allow", "bash": "allow", "webfetch": "allow",
                       "external_directory": {"*": "allow"}}),
            ),
            (
                PermissionPolicy::Auto,
                Capability::Workspace,
                json!({"edit": "allow", "bash": "allow", "webfetch": "allow",
                       "external_directory": {"*": "deny"}}),
            ),
            (
                PermissionPolicy::Restricted,
                Capability::Workspace,
                json!({"edit": "deny", "bash": "deny", "webfetch": "deny",
                       "external_directory": {"*": "deny"}}),
            ),
            (
                PermissionPolicy::Auto,
                Capability::ReadOnly,
                json!({"edit": "deny", "bash": "deny", "webfetch": "allow",
                       "external_directory": {"*": "deny"}}),
            ),
            (
                PermissionPolicy::Ask,
                Capability::ReadOnly,
                json!({"edit": "deny", "bash": "deny", "webfetch": "ask",
                       "external_directory": {"*": "deny"}}),
            ),
        ];
        for (policy, capability, rules) in table {
            assert_eq!(
                permission_rules(policy, capability),
                rules,
                "{policy:?} {capability:?}"
            );
        }
    }

    #[test]
    fn drover_sets_the_password_and_rules_over_the_configured_env() {
        let env = serve_env(
            &spec(PermissionPolicy::Ask, Capability::Workspace),
            "s3cret",
        );
        assert_eq!(env["HOME"], "/h");
        assert_eq!(env["OPENCODE_SERVER_PASSWORD"], "s3cret");
        assert_eq!(env["OPENCODE_SERVER_USERNAME"], SERVER_USER);
        let rules: Value = serde_json::from_str(&env["OPENCODE_PERMISSION"]).unwrap();
        assert_eq!(rules["bash"], "ask");
    }

    #[test]
    fn the_interface_opens_the_runs_session_within_its_limits_and_export_reads_it() {
        let mut s = spec(PermissionPolicy::Auto, Capability::ReadOnly);
        s.model = Some("mock/mock-model".into());
        assert_eq!(
            interactive_args(&s, "ses_1"),
            ["--print-logs", "--session=ses_1", "--model=mock/mock-model"]
        );
        assert_eq!(
            export_args(&s, "ses_1"),
            ["--print-logs", "export", "ses_1"]
        );
        let env = interactive_env(&s);
        assert_eq!(
            env["HOME"], "/h",
            "the configured data, so the same database"
        );
        let rules: Value = serde_json::from_str(&env["OPENCODE_PERMISSION"]).unwrap();
        assert_eq!(
            rules,
            permission_rules(PermissionPolicy::Auto, Capability::ReadOnly)
        );
    }

    #[test]
    fn the_listening_line_names_a_loopback_url() {
        let table = [
            (
                "opencode server listening on http://127.0.0.1:4096",
                Some("http://127.0.0.1:4096"),
            ),
            (
                "opencode server listening on http://localhost:5000/",
                Some("http://127.0.0.1:5000"),
            ),
            ("opencode server listening on http://0.0.0.0:4096", None),
            ("opencode server listening on http://10.1.2.3:80", None),
            ("listening on http://127.0.0.1:notaport", None),
            (
                "Warning: OPENCODE_SERVER_PASSWORD is not set; server is unsecured.",
                None,
            ),
            ("", None),
            ("listening on ", None),
        ];
        for (line, url) in table {
            assert_eq!(listening_url(line).as_deref(), url, "{line:?}");
        }
    }

    #[test]
    fn passwords_are_fresh_hex() {
        let a = fresh_password().expect("/dev/urandom");
        let b = fresh_password().expect("/dev/urandom");
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn drovers_mcp_server_is_inline_config_when_offered() {
        let mut s = spec(PermissionPolicy::Ask, Capability::Workspace);
        assert!(!serve_env(&s, "pw").contains_key("OPENCODE_CONFIG_CONTENT"));
        s.mcp = Some(crate::providers::McpServer {
            command: PathBuf::from("/bin/drover"),
            args: vec!["mcp".into()],
            env: BTreeMap::from([("DROVER_RUN_ID".to_string(), "r1".to_string())]),
        });
        let env = serve_env(&s, "pw");
        let config: Value = serde_json::from_str(&env["OPENCODE_CONFIG_CONTENT"]).unwrap();
        let drover = &config["mcp"]["drover"];
        assert_eq!(drover["type"], "local");
        assert_eq!(drover["command"], json!(["/bin/drover", "mcp"]));
        assert_eq!(drover["environment"]["DROVER_RUN_ID"], "r1");
    }
}
