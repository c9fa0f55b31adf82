//! Where the pinned provider CLIs are: `tests/peers/node_modules/.bin/`, installed by
//! `npm ci` in `tests/peers/` (scripts/test.sh does it before `cargo test`).
//!
//! What must stay true: a missing CLI fails the test that needs it, with the command that
//! installs it; it is never a silent skip.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// `tests/peers/`.
pub fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// The executable `name` (`claude`, `codex`, `opencode`) installed under `dir`'s
/// `node_modules/.bin`; panics, saying how to install it, when it is not there.
pub fn cli_in(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join("node_modules/.bin").join(name);
    if !path.exists() {
        panic!(
            "the pinned `{name}` CLI is not installed ({} is missing). The conformance tests \
             run the real provider CLIs: install them with `npm ci` in tests/peers (needs \
             Node.js and npm), or run scripts/test.sh, which does it before cargo test.",
            path.display()
        );
    }
    path
}

/// The pinned CLI `name`.
pub fn cli(name: &str) -> PathBuf {
    cli_in(&peers_dir(), name)
}

/// The version `tests/peers/package.json` pins for `package`.
pub fn pinned_version(package: &str) -> String {
    let path = peers_dir().join("package.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let manifest: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    manifest["dependencies"][package]
        .as_str()
        .unwrap_or_else(|| panic!("{} pins no version of {package}", path.display()))
        .to_string()
}

/// The environment every CLI child gets in these tests besides its own variables: a
/// PATH (the CLIs run shells and `node`), a UTF-8 locale, and nothing from the caller's
/// environment (no credentials, no real endpoints).
pub fn base_env(home: &Path) -> Vec<(String, String)> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    vec![
        ("PATH".into(), path),
        ("HOME".into(), home.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
    ]
}

/// The environment docs/PROVIDERS.md §"Tests offline" gives Claude Code to run offline against a mock
/// Anthropic API at `api_url`: a fake key, no telemetry, no other traffic, no updates,
/// and its config and home under `root` (created by the CLI as needed).
pub fn claude_env(root: &Path, api_url: &str) -> Vec<(String, String)> {
    [
        ("ANTHROPIC_BASE_URL", api_url.to_string()),
        ("ANTHROPIC_API_KEY", "sk-ant-mock-key".into()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        (
            "CLAUDE_CONFIG_DIR",
            root.join("claude-config").display().to_string(),
        ),
        ("HOME", root.join("home").display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Runs `program args` with `env` only (bounded by `timeout`), where only loopback
/// exists (`crate::loopback::require`); its exit success, stdout and stderr.
pub async fn run_bounded(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
) -> (bool, String, String) {
    crate::loopback::require();
    let child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{} {args:?} ran past {timeout:?}", program.display()))
        .expect("the child's output");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_clis_are_installed_at_their_pinned_versions() {
    let home = tempfile::tempdir().unwrap();
    let mut env = base_env(home.path());
    for dir in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
    ] {
        env.push((dir.into(), home.path().join(dir).display().to_string()));
    }
    env.push(("CODEX_HOME".into(), home.path().display().to_string()));
    env.push(("DISABLE_AUTOUPDATER".into(), "1".into()));
    env.push(("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()));
    for (bin, package) in [
        ("claude", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
        ("opencode", "opencode-ai"),
    ] {
        let (ok, stdout, stderr) = run_bounded(
            &cli(bin),
            &["--version"],
            &env,
            home.path(),
            Duration::from_secs(60),
        )
        .await;
        let pinned = pinned_version(package);
        assert!(ok, "{bin} --version failed: {stdout}{stderr}");
        assert!(
            stdout.contains(&pinned),
            "{bin} --version says {stdout:?}, but tests/peers/package.json pins {package} {pinned}: \
             run `npm ci` in tests/peers"
        );
    }
}

#[test]
fn a_missing_cli_fails_with_the_command_that_installs_it() {
    let empty = tempfile::tempdir().unwrap();
    let failure = std::panic::catch_unwind(|| cli_in(empty.path(), "claude"))
        .expect_err("a missing CLI must fail the test, not skip it");
    let message = failure
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        message.contains("npm ci") && message.contains("tests/peers"),
        "{message}"
    );
    assert!(message.contains("scripts/test.sh"), "{message}");
}

/// What `node` (the runtime the pinned CLIs start from) gets when it connects to
/// `127.0.0.1:port` and to two addresses past loopback (TEST-NET-1 and the IPv6
/// documentation prefix, reserved and never routed): `connected` or the error's code.
const PROBE: &str = r#"
const net = require('net');
function attempt(host, port) {
  return new Promise(done => {
    const s = net.connect({host, port});
    s.setTimeout(5000);
    s.on('connect', () => { s.end('probe'); done('connected'); });
    s.on('error', e => done(e.code || String(e)));
    s.on('timeout', () => { s.destroy(); done('timeout'); });
  });
}
(async () => {
  const port = Number(process.argv[1]);
  const out = {
    loopback: await attempt('127.0.0.1', port),
    outside_v4: await attempt('192.0.2.1', 80),
    outside_v6: await attempt('2001:db8::1', 80),
  };
  console.log(JSON.stringify(out));
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clis_run_where_only_loopback_exists_and_nothing_past_it_is_reachable() {
    if !crate::loopback::only_loopback() && crate::loopback::host_network_accepted() {
        // The developer accepted the machine's network: nothing to prove, and no
        // connection past loopback is tried from here.
        eprintln!(
            "skipped: {}=host, the tests run with this machine's network ({})",
            crate::loopback::ACCEPT_VAR,
            crate::loopback::interfaces().join(", ")
        );
        return;
    }
    crate::loopback::require();
    // drover, and so the CLIs it starts, in the same namespace.
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let drover = crate::drover::Drover::start_with(|_| String::new()).await;
    let serve = std::fs::read_link(format!("/proc/{}/ns/net", drover.serve_pid())).unwrap();
    assert_eq!(serve, own, "drover serve runs in another network namespace");
    drop(drover);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let accepted = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut said = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut said)
            .await
            .unwrap();
        said
    });
    let home = tempfile::tempdir().unwrap();
    let node = which::which("node").expect("node is on PATH (the CLIs need it)");
    let (ok, stdout, stderr) = run_bounded(
        &node,
        &["-e", PROBE, &port],
        &base_env(home.path()),
        home.path(),
        Duration::from_secs(30),
    )
    .await;
    assert!(ok, "the probe failed: {stdout}{stderr}");
    let got: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(got["loopback"], "connected", "{got}");
    let said = tokio::time::timeout(Duration::from_secs(10), accepted)
        .await
        .expect("the loopback connection arrived")
        .unwrap();
    assert_eq!(said, "probe");
    assert_eq!(got["outside_v4"], "ENETUNREACH", "{got}");
    assert_eq!(got["outside_v6"], "ENETUNREACH", "{got}");
}

#[test]
fn outside_a_loopback_only_namespace_the_refusal_says_how_to_run_the_tests() {
    let message = crate::loopback::refusal(&["lo".into(), "eth0".into()]);
    assert!(message.contains("lo, eth0"), "{message}");
    assert!(message.contains("scripts/test.sh"), "{message}");
    assert!(message.contains("DROVER_TEST_NETWORK=host"), "{message}");
    assert!(message.contains("tests/peers/README.md"), "{message}");
}
