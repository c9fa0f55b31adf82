//! `drover doctor` against fake provider CLIs: found and tested, found with another
//! version, missing, disabled.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
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

fn doctor(home: &Path, json: bool) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drover"));
    cmd.arg("doctor").env("DROVER_HOME", home);
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
             [providers.opencode]\ncommand = \"drover-test-no-such-opencode\"\n"
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
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["doctor", "--json"])
        .env("DROVER_HOME", home)
        .env("PATH", bin)
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
