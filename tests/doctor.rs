//! `drover doctor` against fake provider CLIs (found and tested, found with another
//! version, missing, disabled) and against the pinned CLIs the tests installed
//! (`tests/peers/node_modules/.bin`).
//!
//! What must stay true: doctor runs here with a test environment only — PATH holds the
//! CLIs the tests installed and the system's directories, HOME and the XDG directories
//! are throwaway ones, the CLIs' update checks are off — never the caller's PATH or
//! environment, and where only loopback exists (`loopback`, as for tests/peers).
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

#[path = "peers/loopback.rs"]
mod loopback;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fake_cli(dir: &Path, name: &str, version_line: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version_line}'; fi\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// `tests/peers/node_modules/.bin`, where `npm ci` in tests/peers put the pinned CLIs;
/// fails, saying how to install them, when they are not there.
fn installed_clis() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/node_modules/.bin");
    for cli in [
        "claude",
        "codex",
        "opencode",
        "claude-agent-acp",
        "codex-acp",
        "gemini",
    ] {
        assert!(
            bin.join(cli).exists(),
            "the pinned `{cli}` CLI is not installed in {}: run `npm ci` in tests/peers (needs \
             Node.js and npm), or scripts/test.sh, which does it before cargo test",
            bin.display()
        );
    }
    bin
}

/// `drover doctor` with `DROVER_HOME=home` and the test environment (see the module
/// doc): PATH is `path`; HOME, the XDG directories and `CODEX_HOME` are under `scratch`.
fn doctor_command(home: &Path, scratch: &Path, path: &[PathBuf]) -> Command {
    loopback::require();
    let path = std::env::join_paths(path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.arg("doctor")
        .env_clear()
        .env("PATH", path)
        .env("DROVER_HOME", home)
        .env("HOME", scratch.join("home"))
        .env("CODEX_HOME", scratch.join("codex-home"))
        .env("LANG", "C.UTF-8")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("npm_config_offline", "true");
    for (var, dir) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
    ] {
        cmd.env(var, scratch.join(dir));
    }
    for dir in ["home", "codex-home", "config", "data", "cache", "state"] {
        std::fs::create_dir_all(scratch.join(dir)).unwrap();
    }
    cmd
}

/// The test PATH: the installed CLIs, the system's directories, and the directory of
/// `node` (which the pinned CLIs run on) when it is elsewhere.
fn test_path() -> Vec<PathBuf> {
    let mut path = vec![installed_clis()];
    path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(PathBuf::from));
    if let Some(dir) = which::which("node")
        .ok()
        .and_then(|n| n.parent().map(Path::to_path_buf))
        && !path.contains(&dir)
    {
        path.push(dir);
    }
    path
}

fn doctor(home: &Path, json: bool) -> (i32, String) {
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = doctor_command(home, scratch.path(), &test_path());
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn doctor_reports_each_cli_its_version_and_the_fix_for_what_is_wrong() {
    let home = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    let claude = fake_cli(bin.path(), "claude", "2.1.197 (Claude Code)");
    let codex = fake_cli(bin.path(), "codex", "codex-cli 0.99.0");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[providers.claude-code]\ncommand = \"{claude}\"\n\
             [providers.codex]\ncommand = \"{codex}\"\n\
             [providers.opencode]\ncommand = \"drover-test-no-such-opencode\"\n\
             [providers.gemini]\ncommand = \"drover-test-no-such-gemini\"\n\
             [providers.qwen]\ncommand = \"drover-test-no-such-qwen\"\n"
        ),
    )
    .unwrap();
    let (code, out) = doctor(home.path(), true);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let provider = |name: &str| -> Value {
        report["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is checked: {report}"))
    };
    let c = provider("claude-code");
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(c["version"], "2.1.197");
    assert_eq!(c["path"], claude.as_str());
    assert_eq!(c["fix"], Value::Null);

    let x = provider("codex");
    assert_eq!(x["status"], "untested-version", "{x}");
    assert_eq!(x["version"], "0.99.0");
    assert_eq!(x["tested_version"], "0.171.0");
    assert!(
        x["fix"].as_str().unwrap().contains("@openai/codex@0.171.0"),
        "{x}"
    );

    let o = provider("opencode");
    assert_eq!(o["status"], "missing", "{o}");
    let fix = o["fix"].as_str().unwrap();
    assert!(fix.contains("npm install -g opencode-ai@"), "{fix}");
    assert!(fix.contains("[providers.opencode]"), "{fix}");

    // A missing ACP agent: its npm package, at the tested version when there is one.
    let g = provider("gemini");
    assert_eq!(g["status"], "missing", "{g}");
    assert!(
        g["fix"]
            .as_str()
            .unwrap()
            .contains("npm install -g @google/gemini-cli@0.61.0"),
        "{g}"
    );
    let q = provider("qwen");
    assert_eq!(q["status"], "missing", "{q}");
    assert_eq!(q["tested_version"], Value::Null, "{q}");
    assert!(
        q["fix"]
            .as_str()
            .unwrap()
            .contains("npm install -g @qwen-code/qwen-code"),
        "{q}"
    );

    let s = provider("sim");
    assert_eq!(s["status"], "ok", "{s}");
    assert_eq!(s["version"], env!("CARGO_PKG_VERSION"));

    let home_str = home.path().display().to_string();
    assert_eq!(report["config_file"], format!("{home_str}/config.toml"));
    assert_eq!(report["config_exists"], true);
    assert_eq!(report["owner_pid"], Value::Null);

    // The human form says the same, with the fixes on their own lines.
    let (code, text) = doctor(home.path(), false);
    assert_eq!(code, 0);
    assert!(text.contains("owner    none"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("opencode") && l.contains("missing")),
        "{text}"
    );
    assert!(
        text.contains("fix: `drover-test-no-such-opencode` is not on PATH"),
        "{text}"
    );
}

#[test]
fn a_disabled_provider_is_reported_as_disabled() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[providers.codex]\ncommand = \"codex\"\nenabled = false\n",
    )
    .unwrap();
    let (_, out) = doctor(home.path(), true);
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let codex = report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "codex")
        .unwrap()
        .clone();
    assert_eq!(codex["status"], "disabled");
}

#[test]
fn a_broken_config_is_reported_and_the_defaults_are_checked() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[limits]\nmax_turnz = 3\n").unwrap();
    let (code, out) = doctor(home.path(), true);
    assert_eq!(code, 0, "doctor answers with a broken config: {out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["config_exists"], true);
    assert_eq!(report["config_error"]["code"], "CONFIG_INVALID", "{report}");
    let message = report["config_error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did you mean `max_turns_default`?"),
        "{message}"
    );
    let sim = report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "sim")
        .cloned()
        .unwrap_or_else(|| panic!("the defaults' providers are checked: {report}"));
    assert_eq!(sim["status"], "ok", "{sim}");

    let (code, text) = doctor(home.path(), false);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("(refused: "), "{text}");
    assert!(
        text.contains("fix: error[CONFIG_INVALID]: ") && text.contains("max_turnz"),
        "{text}"
    );
    // Doctor only looks: nothing was written next to the config.
    let mut entries: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["config.toml"]);
}

/// `drover doctor --json` with `PATH` holding only `bin` (and the fake CLIs in it).
fn doctor_with_path(home: &Path, bin: &Path) -> Value {
    let scratch = tempfile::tempdir().unwrap();
    let out = doctor_command(home, scratch.path(), &[bin.to_path_buf()])
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn doctor_checks_git_and_its_version() {
    let home = tempfile::tempdir().unwrap();
    let report = doctor_with_path(home.path(), Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(report["git"]["status"], "missing", "{report}");
    assert!(
        report["git"]["fix"]
            .as_str()
            .unwrap()
            .contains("install git"),
        "{report}"
    );
    assert_eq!(
        report["worktrees"],
        home.path().join("worktrees").display().to_string()
    );

    let bin = tempfile::tempdir().unwrap();
    fake_cli(bin.path(), "git", "git version 2.30.2");
    let report = doctor_with_path(home.path(), bin.path());
    assert_eq!(report["git"]["status"], "too-old", "{report}");
    assert_eq!(report["git"]["version"], "2.30.2");
    assert_eq!(report["git"]["minimum"], "2.38");

    fake_cli(bin.path(), "git", "git version 2.47.3");
    let report = doctor_with_path(home.path(), bin.path());
    assert_eq!(report["git"]["status"], "ok", "{report}");
    assert_eq!(report["git"]["fix"], Value::Null);
}

#[test]
fn doctor_finds_the_pinned_clis_the_tests_installed_and_each_answers_its_version() {
    let home = tempfile::tempdir().unwrap();
    let (code, out) = doctor(home.path(), true);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let installed = installed_clis();
    // The ACP agents too: `gemini` and `opencode` answer `--version`; claude-agent-acp
    // and codex-acp answer none, and their npm package's version is shown.
    for (provider, cli) in [
        ("claude-code", "claude"),
        ("codex", "codex"),
        ("opencode", "opencode"),
        ("opencode-acp", "opencode"),
        ("claude-acp", "claude-agent-acp"),
        ("codex-acp", "codex-acp"),
        ("gemini", "gemini"),
    ] {
        let check = report["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == provider)
            .cloned()
            .unwrap_or_else(|| panic!("{provider} is checked: {report}"));
        assert_eq!(
            check["path"],
            installed.join(cli).display().to_string(),
            "doctor ran another {cli} than the one the tests installed: {check}"
        );
        assert_eq!(check["status"], "ok", "{check}");
        assert_eq!(check["version"], check["tested_version"], "{check}");
    }
}
