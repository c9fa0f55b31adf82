//! `drover sim-agent` (hidden): the simulated agent, started by drover's Claude adapter
//! the way it starts `claude`.
//!
//! Owns reading the command line (`--scenario NAME|FILE` plus Claude Code's own flags)
//! and finding the scenario. What must stay true: any flag `claude` takes is accepted
//! (unknown ones are ignored); `--model`, `--resume`, `--permission-mode`,
//! `--permission-prompt-tool`, `--allowedTools` and `--disallowedTools` are honoured; a
//! bad command line or scenario is exit code 2 with one line on stderr. The process
//! touches nothing in drover's data directory but its own session files
//! (`sim-sessions/`, [`drover_core::sim::session`]), and never the log file: stdout is the
//! protocol.

use clap::Args;
use std::path::Path;

use drover_core::sim::agent::{self, AgentOptions, PermissionMode};
use drover_core::sim::scenario::{self, Format, Scenario};
use drover_core::sim::session::SessionStore;

/// The scenario used when neither `--scenario` nor the environment names one.
pub const DEFAULT_SCENARIO: &str = "quick-success";
/// Names the scenario when `--scenario` is not given.
pub const SCENARIO_ENV: &str = "DROVER_SIM_SCENARIO";
/// The exit code of a bad command line or scenario.
pub const USAGE_EXIT_CODE: i32 = 2;

/// Everything after `sim-agent`, read by [`parse_flags`] rather than clap, so that any
/// flag the real CLI takes is accepted.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct SimAgentArgs {
    /// `--scenario NAME|FILE` and Claude Code's flags.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// The flags the sim acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimFlags {
    pub scenario: Option<String>,
    pub model: Option<String>,
    pub resume: Option<String>,
    pub permission_mode: Option<String>,
    pub permission_prompt_tool: Option<String>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub skip_permissions: bool,
    /// `--interactive`: the interactive mode (a take-over), on the `--resume` session.
    pub interactive: bool,
    /// `--acp`: speak the Agent Client Protocol instead of stream-json.
    pub acp: bool,
}

/// Claude Code flags that take one value the sim does not use.
const IGNORED_VALUE_FLAGS: &[&str] = &[
    "--max-turns",
    "--max-budget-usd",
    "--fallback-model",
    "--system-prompt",
    "--append-system-prompt",
    "--settings",
    "--session-id",
    "--setting-sources",
    "--agents",
    "--json-schema",
    "--debug-file",
];

/// Flags that take a list of values (up to the next flag).
const LIST_FLAGS: &[&str] = &[
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--tools",
    "--mcp-config",
    "--add-dir",
    "--betas",
];

/// Reads the command line after `sim-agent`. Unknown flags and bare words are ignored.
pub fn parse_flags(args: &[String]) -> Result<SimFlags, String> {
    let mut flags = SimFlags::default();
    let mut index = 0;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        if LIST_FLAGS.contains(&name) {
            let mut values: Vec<String> = inline.into_iter().collect();
            while index < args.len() && !args[index].starts_with('-') {
                values.push(args[index].clone());
                index += 1;
            }
            // `--allowedTools "Bash,Read"` and `--allowedTools Bash Read` both work.
            let values = values
                .iter()
                .flat_map(|value| split_tool_list(value))
                .collect::<Vec<_>>();
            match name {
                "--allowedTools" | "--allowed-tools" => flags.allowed_tools.extend(values),
                "--disallowedTools" | "--disallowed-tools" => {
                    flags.disallowed_tools.extend(values);
                }
                _ => {}
            }
            continue;
        }
        let mut value = || -> Result<String, String> {
            if let Some(value) = inline.clone() {
                return Ok(value);
            }
            let value = args
                .get(index)
                .filter(|value| !value.starts_with("--"))
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))?;
            index += 1;
            Ok(value)
        };
        match name {
            "--scenario" => flags.scenario = Some(value()?),
            "--model" => flags.model = Some(value()?),
            "--resume" | "-r" => flags.resume = Some(value()?),
            "--permission-mode" => flags.permission_mode = Some(value()?),
            "--permission-prompt-tool" => flags.permission_prompt_tool = Some(value()?),
            "--input-format" | "--output-format" => {
                let format = value()?;
                if format != "stream-json" {
                    return Err(format!(
                        "{name} {format} is not supported: the simulated agent speaks stream-json only"
                    ));
                }
            }
            "--dangerously-skip-permissions" => flags.skip_permissions = true,
            "--interactive" => flags.interactive = true,
            "--acp" => flags.acp = true,
            _ if IGNORED_VALUE_FLAGS.contains(&name) => {
                value()?;
            }
            // `--verbose`, `-p`, `--include-partial-messages`, unknown flags, a prompt.
            _ => {}
        }
    }
    for (name, value) in [
        ("--scenario", &flags.scenario),
        ("--model", &flags.model),
        ("--resume", &flags.resume),
    ] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(format!("{name} needs a value"));
        }
    }
    Ok(flags)
}

/// `Bash,Read` or `Bash(git log:*) Read` into rules; commas inside parentheses stay.
fn split_tool_list(value: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in value.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c == ',' || c.is_whitespace()) {
            if !current.trim().is_empty() {
                rules.push(current.trim().to_string());
            }
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        rules.push(current.trim().to_string());
    }
    rules
}

/// The scenario a `--scenario` value names: a shipped name, or a path to a TOML or JSON
/// file. Returns the one-line problem otherwise.
pub fn load_scenario(name_or_path: &str) -> Result<Scenario, String> {
    if let Some(text) = scenario::builtin(name_or_path) {
        return scenario::parse(
            text,
            Format::Toml,
            &format!("built-in scenario `{name_or_path}`"),
        )
        .map_err(|e| e.to_string());
    }
    let path = Path::new(name_or_path);
    let looks_like_a_path = scenario::looks_like_path(name_or_path) || path.exists();
    if !looks_like_a_path {
        return Err(format!(
            "no scenario named `{name_or_path}`: use one of {} or a path to a .toml or .json file",
            scenario::builtin_names().join(", ")
        ));
    }
    let origin = format!("scenario file {}", path.display());
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read it: {e}"))?;
    let format = if path.extension().is_some_and(|ext| ext == "json") {
        Format::Json
    } else {
        Format::Toml
    };
    scenario::parse(&text, format, &origin).map_err(|e| e.to_string())
}

/// What the command line asks for, ready to run.
pub fn options_from(
    flags: SimFlags,
    env: impl Fn(&str) -> Option<String>,
) -> Result<AgentOptions, String> {
    let name = flags
        .scenario
        .clone()
        .or_else(|| env(SCENARIO_ENV).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_SCENARIO.to_string());
    let mut scenario = load_scenario(&name)?;
    scenario.apply_env(&env)?;
    let permission_mode = match flags.permission_mode.as_deref() {
        None if flags.skip_permissions => PermissionMode::BypassPermissions,
        None => PermissionMode::Default,
        Some(mode) => PermissionMode::parse(mode).ok_or_else(|| {
            format!(
                "--permission-mode {mode} is not a permission mode: use one of {}",
                PermissionMode::NAMES.join(", ")
            )
        })?,
    };
    // Sessions are kept in the data directory of the drover that started the sim (it
    // sets `DROVER_HOME` to it); run by hand, where drover would keep its data.
    let sessions =
        drover_core::paths::Paths::resolve_from(env(drover_core::paths::HOME_ENV).map(Into::into))
            .ok()
            .map(|paths| SessionStore::in_data_dir(&paths.data_dir));
    Ok(AgentOptions {
        scenario,
        scenario_name: name,
        model: flags.model,
        resume: flags.resume,
        sessions,
        permission_mode,
        prompt_tool_stdio: flags.permission_prompt_tool.as_deref() == Some("stdio"),
        allowed_tools: flags.allowed_tools,
        disallowed_tools: flags.disallowed_tools,
        cwd: std::env::current_dir()
            .map(|dir| dir.display().to_string())
            .unwrap_or_default(),
        version: format!("{}-sim", env!("CARGO_PKG_VERSION")),
    })
}

/// The interactive mode's options: it needs the session (`--resume`) and a place to keep
/// its transcript.
fn interactive_options(
    options: &AgentOptions,
) -> Result<drover_core::sim::interactive::Interactive, String> {
    let session = options
        .resume
        .clone()
        .ok_or("--interactive needs --resume SESSION: the session to go on in")?;
    let transcript = options
        .sessions
        .as_ref()
        .and_then(|store| store.transcript_of(&session))
        .ok_or_else(|| {
            format!("session {session:?} cannot be kept: use a plain id and set DROVER_HOME")
        })?;
    Ok(drover_core::sim::interactive::Interactive {
        session,
        transcript,
        model: options
            .model
            .clone()
            .unwrap_or_else(|| options.scenario.model.clone()),
        cwd: options.cwd.clone().into(),
    })
}

/// Runs the simulated agent on stdin/stdout; returns the process's exit code.
pub fn run(args: SimAgentArgs) -> i32 {
    let parsed = parse_flags(&args.args);
    let interactive = parsed.as_ref().is_ok_and(|f| f.interactive);
    let acp = parsed.as_ref().is_ok_and(|f| f.acp);
    let options = match parsed.and_then(|flags| options_from(flags, |var| std::env::var(var).ok()))
    {
        Ok(options) => options,
        Err(problem) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "drover sim-agent: {problem}");
            return USAGE_EXIT_CODE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "drover sim-agent: cannot start: {e}");
            return 1;
        }
    };
    if interactive {
        return match interactive_options(&options) {
            Ok(mode) => {
                let input = tokio::io::BufReader::new(tokio::io::stdin());
                let code = runtime.block_on(drover_core::sim::interactive::run(
                    mode,
                    input,
                    &mut std::io::stdout(),
                ));
                runtime.shutdown_background();
                code
            }
            Err(problem) => {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "drover sim-agent: {problem}");
                USAGE_EXIT_CODE
            }
        };
    }
    let code = if acp {
        runtime.block_on(drover_core::sim::acp::run(options))
    } else {
        runtime.block_on(agent::run(options, tokio::io::stdin(), tokio::io::stdout()))
    };
    // The stdin reader may be blocked in a read that never ends; do not wait for it.
    runtime.shutdown_background();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Result<SimFlags, String> {
        parse_flags(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_flags_claude_gets_are_read() {
        let f = flags(&[
            "--scenario",
            "tool-permission",
            "--input-format",
            "stream-json",
            "--output-format=stream-json",
            "--verbose",
            "--permission-prompt-tool",
            "stdio",
            "--model",
            "claude-opus-4-1",
            "--resume=abc-123",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Read",
            "Bash(git log:*),Grep",
            "--disallowedTools=WebFetch",
            "--max-turns",
            "6",
            "-p",
        ])
        .unwrap();
        assert_eq!(
            f,
            SimFlags {
                scenario: Some("tool-permission".into()),
                model: Some("claude-opus-4-1".into()),
                resume: Some("abc-123".into()),
                permission_mode: Some("acceptEdits".into()),
                permission_prompt_tool: Some("stdio".into()),
                allowed_tools: vec!["Read".into(), "Bash(git log:*)".into(), "Grep".into()],
                disallowed_tools: vec!["WebFetch".into()],
                skip_permissions: false,
                interactive: false,
                acp: false,
            }
        );
        assert!(flags(&["--acp", "--scenario", "hang"]).unwrap().acp);
        assert_eq!(
            flags(&["--resume", "s1"]).unwrap().resume.as_deref(),
            Some("s1")
        );
        assert_eq!(flags(&["-r", "s2"]).unwrap().resume.as_deref(), Some("s2"));
    }

    #[test]
    fn clap_hands_every_flag_through_and_hides_the_subcommand() {
        use crate::cli::{Cli, Command};
        use clap::{CommandFactory, Parser};
        let raw = [
            "--scenario",
            "hang",
            "-p",
            "--verbose",
            "--resume=abc",
            "--help",
            "--unknown",
        ];
        let cli = Cli::try_parse_from(["drover", "sim-agent"].iter().chain(raw.iter())).unwrap();
        match cli.command {
            Command::SimAgent(args) => assert_eq!(args.args, raw),
            other => panic!("{other:?}"),
        }
        let command = Cli::command();
        let sub = command.find_subcommand("sim-agent").unwrap();
        assert!(sub.is_hide_set());
    }

    #[test]
    fn unknown_flags_and_words_are_ignored() {
        let f = flags(&[
            "--include-partial-messages",
            "--some-new-flag",
            "value",
            "--other=1",
            "a prompt",
            "--model",
            "m",
        ])
        .unwrap();
        assert_eq!(f.model.as_deref(), Some("m"));
        assert_eq!(flags(&[]).unwrap(), SimFlags::default());
    }

    #[test]
    fn a_bad_command_line_says_what_is_wrong() {
        assert_eq!(flags(&["--model"]).unwrap_err(), "--model needs a value");
        assert_eq!(
            flags(&["--scenario", "--verbose"]).unwrap_err(),
            "--scenario needs a value"
        );
        assert_eq!(flags(&["--resume="]).unwrap_err(), "--resume needs a value");
        assert!(
            flags(&["--output-format", "text"])
                .unwrap_err()
                .contains("stream-json only")
        );
    }

    #[test]
    fn options_pick_the_scenario_mode_and_model() {
        let none = |_: &str| None;
        let o = options_from(SimFlags::default(), none).unwrap();
        assert_eq!(o.scenario, load_scenario(DEFAULT_SCENARIO).unwrap());
        assert_eq!(o.permission_mode, PermissionMode::Default);
        assert!(!o.prompt_tool_stdio);
        assert!(o.version.ends_with("-sim"));

        let from_env = |var: &str| (var == SCENARIO_ENV).then(|| "hang".to_string());
        let o = options_from(SimFlags::default(), from_env).unwrap();
        assert_eq!(o.scenario, load_scenario("hang").unwrap());

        let skip = SimFlags {
            skip_permissions: true,
            permission_prompt_tool: Some("stdio".into()),
            ..SimFlags::default()
        };
        let o = options_from(skip, none).unwrap();
        assert_eq!(o.permission_mode, PermissionMode::BypassPermissions);
        assert!(o.prompt_tool_stdio);

        let bad_mode = SimFlags {
            permission_mode: Some("ask".into()),
            ..SimFlags::default()
        };
        assert!(
            options_from(bad_mode, none)
                .unwrap_err()
                .starts_with("--permission-mode ask is not a permission mode")
        );

        let flood = SimFlags {
            scenario: Some("flood".into()),
            ..SimFlags::default()
        };
        let o = options_from(flood, |var: &str| {
            (var == "DROVER_SIM_FLOOD_EVENTS").then(|| "12".to_string())
        })
        .unwrap();
        assert_eq!(o.scenario.turns[0].steps[0].repeat.times, 12);
    }

    #[test]
    fn unknown_names_and_bad_files_are_one_line_problems() {
        let e = load_scenario("nope").unwrap_err();
        assert!(
            e.starts_with("no scenario named `nope`: use one of quick-success"),
            "{e}"
        );

        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.toml");
        let e = load_scenario(&missing.display().to_string()).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "scenario file {}: cannot read it",
                missing.display()
            )),
            "{e}"
        );

        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "model = \"m\"\n[[turns]]\nsteps = [{ txt = \"hi\" }]\n",
        )
        .unwrap();
        let e = load_scenario(&bad.display().to_string()).unwrap_err();
        assert_eq!(
            e,
            format!(
                "scenario file {}: turn 1, step 1: a step needs one of text, thinking, tool, question, rate_limit, api_retry, garbage, sleep_ms, crash, hang, result; found `txt`",
                bad.display()
            )
        );

        let json = dir.path().join("ok.json");
        std::fs::write(
            &json,
            r#"{"model":"m","turns":[{"steps":[{"text":"hi"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            load_scenario(&json.display().to_string()).unwrap().model,
            "m"
        );
    }

    #[test]
    fn tool_lists_split_on_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            split_tool_list("Bash(git log:*, git diff:*), Read Grep"),
            vec!["Bash(git log:*, git diff:*)", "Read", "Grep"]
        );
        assert!(split_tool_list(" , ").is_empty());
    }
}
