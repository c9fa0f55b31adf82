//! The real `drover` binary with `DROVER_HOME` set to a fresh directory: `config path`,
//! `config show`, the refusals a broken config file gets, the log file a command leaves
//! behind, and the nothing a read-only command leaves.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::run_bounded;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config_file(&self) -> PathBuf {
        self.path().join("config.toml")
    }

    fn write_config(&self, text: impl AsRef<[u8]>) {
        std::fs::write(self.config_file(), text).expect("write config");
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_drover"));
        command
            .args(args)
            .env("DROVER_HOME", self.path())
            .env_remove("DROVER_LOG");
        command
    }

    fn drover(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run drover")
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("utf-8 stderr")
}

/// The command failed with exit code 1 and printed exactly one line,
/// `error[CODE]: …`, containing every one of `parts`.
fn assert_refused(out: &Output, code: &str, parts: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(out));
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with(&format!("error[{code}]: ")), "{err}");
    for part in parts {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
}

#[test]
fn config_path_prints_the_file_under_drover_home() {
    let home = Home::new();
    let out = home.drover(&["config", "path"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{}\n", home.config_file().display()));
}

#[test]
fn config_path_answers_even_when_the_file_is_broken() {
    let home = Home::new();
    home.write_config("this is not toml");
    let out = home.drover(&["config", "path"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{}\n", home.config_file().display()));
}

#[test]
fn config_show_without_a_file_prints_the_defaults() {
    let home = Home::new();
    let out = home.drover(&["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown: toml::Table = toml::from_str(&stdout(&out)).expect("TOML output");
    assert_eq!(shown["limits"]["max_turns_default"].as_integer(), Some(6));
    assert_eq!(
        shown["providers"]["codex"]["command"].as_str(),
        Some("codex")
    );
}

#[test]
fn config_show_merges_the_user_file_over_the_defaults() {
    let home = Home::new();
    home.write_config(
        "[limits]\nmax_turns_default = 3\n\n[limits.per_provider]\ncodex = 1\n\n\
         [providers.claude-code.env]\nCLAUDE_CONFIG_DIR = \"/tmp/acct2\"\n",
    );

    let out = home.drover(&["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown: toml::Table = toml::from_str(&stdout(&out)).expect("TOML output");
    let limits = &shown["limits"];
    assert_eq!(limits["max_turns_default"].as_integer(), Some(3));
    // untouched defaults are still there
    assert_eq!(limits["max_turns_max"].as_integer(), Some(20));
    assert_eq!(limits["per_provider"]["codex"].as_integer(), Some(1));
    assert_eq!(limits["per_provider"]["claude-code"].as_integer(), Some(3));
    let claude = &shown["providers"]["claude-code"];
    assert_eq!(claude["command"].as_str(), Some("claude"));
    // A value a provider's env sets counts as a secret ([redact]): never printed.
    assert_eq!(
        claude["env"]["CLAUDE_CONFIG_DIR"].as_str(),
        Some("[redacted]")
    );

    let out = home.drover(&["config", "show", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON output");
    assert_eq!(json["limits"]["max_turns_default"], 3);
    assert_eq!(json["limits"]["max_turns_max"], 20);
    assert_eq!(json["limits"]["session_hard_cap_usd"], 25.0);
    assert_eq!(json["providers"]["sim"]["enabled"], true);
}

#[test]
fn an_unknown_key_is_refused_with_its_line() {
    let home = Home::new();
    home.write_config("# my settings\n[limits]\nmax_turns_default = 3\nmax_turnz = 4\n");
    let out = home.drover(&["config", "show"]);
    let file = home.config_file();
    assert_refused(
        &out,
        "CONFIG_INVALID",
        &[
            &file.display().to_string(),
            "line 4",
            "`limits.max_turnz`",
            "(did you mean `max_turns_default`?)",
            "known keys in [limits]",
        ],
    );
}

#[test]
fn a_wrong_type_is_refused_with_its_line() {
    let home = Home::new();
    home.write_config("\n[limits]\nmax_turns_default = \"three\"\n");
    let out = home.drover(&["config", "show"]);
    let file = home.config_file();
    assert_refused(
        &out,
        "CONFIG_INVALID",
        &[
            &format!("{} line 3: ", file.display()),
            "`limits.max_turns_default` must be an integer, found a string",
        ],
    );
}

#[test]
fn values_out_of_order_are_refused_with_the_key_the_user_set() {
    let home = Home::new();
    home.write_config("[limits]\nsession_warning_usd = 8.0\nsession_hard_cap_usd = 5.0\n");
    let out = home.drover(&["config", "show"]);
    assert_refused(
        &out,
        "CONFIG_INVALID",
        &[
            &home.config_file().display().to_string(),
            "line 3",
            "`limits.session_hard_cap_usd`",
        ],
    );
}

#[test]
fn a_toml_syntax_error_names_line_and_column() {
    let home = Home::new();
    home.write_config("[limits]\nmax_turns_default = = 3\n");
    let out = home.drover(&["config", "show"]);
    assert_refused(
        &out,
        "CONFIG_INVALID",
        &[
            &format!("{}:2:", home.config_file().display()),
            "not valid TOML",
        ],
    );
}

#[test]
fn a_directory_in_place_of_the_file_is_unreadable() {
    let home = Home::new();
    std::fs::create_dir(home.config_file()).expect("mkdir");
    let out = home.drover(&["config", "show"]);
    assert_refused(
        &out,
        "CONFIG_UNREADABLE",
        &[
            &format!("cannot read {}", home.config_file().display()),
            "directory",
            "fix it or remove it",
        ],
    );
}

#[test]
fn a_file_that_is_not_utf8_is_unreadable() {
    let home = Home::new();
    home.write_config(b"[limits]\n# caf\xe9\n");
    let out = home.drover(&["config", "show"]);
    assert_refused(
        &out,
        "CONFIG_UNREADABLE",
        &[
            &format!("cannot read {}", home.config_file().display()),
            "not valid UTF-8",
            "line 2",
        ],
    );
}

#[test]
fn a_command_leaves_a_private_log_file() {
    let home = Home::new();
    // `shutdown` with no drover running changes nothing, but it is not a read.
    let out = home.drover(&["shutdown"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let logs = home.path().join("logs");
    let dir_mode = std::fs::metadata(&logs)
        .expect("log dir")
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&logs)
        .expect("read log dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("drover.log."), "{name}");
    let mode = std::fs::metadata(&files[0])
        .expect("log file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&files[0]).expect("log text");
    assert!(text.contains("drover started"), "{text}");
}

#[test]
fn a_refusal_is_also_logged() {
    let home = Home::new();
    home.write_config("[limits]\nmax_turnz = 4\n");
    let out = run_bounded(
        home.command(&["serve"]),
        Duration::from_secs(30),
        "serve with a broken config",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let logs = home.path().join("logs");
    let text: String = std::fs::read_dir(&logs)
        .expect("read log dir")
        .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("log text"))
        .collect();
    assert!(text.contains("ERROR"), "{text}");
    assert!(text.contains("CONFIG_INVALID"), "{text}");
}

#[test]
fn dashboard_key_bindings_are_checked_before_the_terminal_is_taken() {
    let home = Home::new();
    home.write_config("[keys.dashboard]\n\"N\" = \"fly_away\"\n");
    // `drover` alone opens the dashboard; the bad binding stops it before that.
    let out = home.drover(&[]);
    let file = home.config_file();
    assert_refused(
        &out,
        "CONFIG_INVALID",
        &[
            &file.display().to_string(),
            "`keys.dashboard.N`",
            "fly_away",
        ],
    );
    home.write_config(
        "[keys.dashboard]\n\"N\" = \"new_dispatch\"\n[notifications]\nenabled = false\n",
    );
    let shown = home.drover(&["config", "show", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&shown)).unwrap();
    assert_eq!(json["keys"]["dashboard"]["N"], "new_dispatch");
    assert_eq!(json["notifications"]["enabled"], false);
}

#[test]
fn with_json_a_refusal_is_json_too() {
    let home = Home::new();
    home.write_config("[limits]\nsession_warning_usd = 8.0\nsession_hard_cap_usd = 5.0\n");
    let out = home.drover(&["config", "show", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "stdout: {}", stdout(&out));
    let err: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("one JSON line");
    assert_eq!(err["error"]["code"], "CONFIG_INVALID", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("session_warning_usd")),
        "{err}"
    );
    // `config path --json` is data too.
    let out = home.drover(&["config", "path", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let path: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        path["path"].as_str(),
        Some(home.config_file().display().to_string().as_str())
    );
}

#[test]
fn read_only_commands_write_nothing_to_the_data_directory() {
    let home = Home::new();
    home.write_config("[limits]\nmax_turns_default = 3\n");
    for args in [
        vec!["config", "path"],
        vec!["config", "path", "--json"],
        vec!["config", "show"],
        vec!["doctor"],
        vec!["doctor", "--json"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["runs"],
        vec!["runs", "--json"],
        vec!["budget"],
        vec!["show", "r-nope"],
    ] {
        let out = run_bounded(
            home.command(&args),
            Duration::from_secs(60),
            &args.join(" "),
        );
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&out)
        );
        let mut entries: Vec<String> = std::fs::read_dir(home.path())
            .expect("read home")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, ["config.toml"], "after drover {args:?}");
    }
}

/// One check of the whole file, whichever command loads it: an unknown key binding is
/// refused by `config show` and `serve` (not only by the dashboard), with the closest
/// action, and `doctor` reports it.
#[test]
fn a_binding_to_no_action_is_refused_by_every_command_with_the_closest_name() {
    let home = Home::new();
    home.write_config("[keys.dashboard]\n\"N\" = \"new_dispatc\"\n");
    let file = home.config_file();
    let parts: [&str; 4] = [
        &file.display().to_string(),
        "line 2",
        "`keys.dashboard.N` binds no action `new_dispatc`",
        "did you mean new_dispatch?",
    ];
    assert_refused(&home.drover(&["config", "show"]), "CONFIG_INVALID", &parts);
    let serve = run_bounded(home.command(&["serve"]), Duration::from_secs(60), "serve");
    assert_refused(&serve, "CONFIG_INVALID", &parts);
    let doctor = home.drover(&["doctor"]);
    let report = format!("{}{}", stdout(&doctor), stderr(&doctor));
    assert!(
        report.contains("binds no action `new_dispatc`; did you mean new_dispatch?"),
        "{report}"
    );
}
