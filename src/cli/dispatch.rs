//! `drover dispatch`: builds a [`SpecInput`] from the command line and hands it to the
//! owner of the data directory — or, when nobody owns it, makes this process the owner
//! for as long as the run lives.
//!
//! What must stay true: validation is the dispatcher's (words and numbers go through
//! raw, so a mistake is refused with its code and sentence, and numbers are clamped, not
//! refused); paths are resolved here, against the caller's directory, because the owner
//! runs elsewhere; in the foreground, events are subscribed to before the dispatch, so
//! not one event of the run is missed, and the run's end (or a signal) shuts the
//! dispatcher down, which records the run as interrupted if it is in a turn (and leaves it
//! as it is for the next owner otherwise).

use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio::sync::broadcast::error::RecvError;

use super::exit::Exit;
use super::headless::{StopSignals, dispatcher_options};
use super::output::{JsonFlag, note, print_json, write_stdout};
use super::render;
use drover_core::clock::now_millis;
use drover_core::control::{ControlClient, Host};
use drover_core::dispatch::api::{RunView, WaitUntil};
use drover_core::dispatch::{DispatchEvent, Request};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;
use drover_core::run_state::RunState;
use drover_core::spec::SpecInput;

/// `--scenario`'s long help: every scenario the simulated provider ships, with its line.
fn scenarios_help() -> String {
    let mut text = format!(
        "The simulated provider's scenario (with --provider sim); without one it runs \
         {}. The shipped scenarios:",
        super::sim::DEFAULT_SCENARIO
    );
    // Every command builds this text (clap builds the whole command line), so only each
    // file's `description = "…"` line is read as TOML, not the whole scenario.
    for name in drover_core::sim::scenario::builtin_names() {
        let about = drover_core::sim::scenario::builtin(name)
            .and_then(|toml_text| {
                toml_text
                    .lines()
                    .find(|line| line.trim_start().starts_with("description"))
            })
            .and_then(|line| toml::from_str::<toml::Table>(line).ok())
            .and_then(|t| t.get("description")?.as_str().map(str::to_string))
            .unwrap_or_default();
        text.push_str(&format!("\n  {name:<18} {about}"));
    }
    text
}

#[derive(Debug, Args)]
pub struct DispatchArgs {
    /// What the run should do (words are joined with spaces).
    #[arg(required = true, value_name = "TASK")]
    pub task: Vec<String>,
    /// claude-code, codex, opencode or sim (default: the configured provider).
    #[arg(long)]
    pub provider: Option<String>,
    /// A model of the provider, or `auto` to route.
    #[arg(long)]
    pub model: Option<String>,
    /// minimal, low, medium, high or xhigh.
    #[arg(long)]
    pub effort: Option<String>,
    /// The directory the run works in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// A one-line title (default: derived from the task).
    #[arg(long)]
    pub title: Option<String>,
    /// Background the worker gets with the task.
    #[arg(long)]
    pub context: Option<String>,
    /// ask (prompt for each tool use), restricted (provider sandbox) or auto.
    #[arg(long)]
    pub policy: Option<String>,
    /// read-only, workspace or full.
    #[arg(long)]
    pub capability: Option<String>,
    /// The run's dollar cap (clamped to the configured range).
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    pub budget: Option<f64>,
    /// Turns before the run ends (clamped to the configured range).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_turns: Option<i64>,
    /// Minutes before the run is stopped (clamped to the configured range).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_minutes: Option<i64>,
    /// End the run after this long idle.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub idle_timeout: Option<i64>,
    /// A tag (repeatable).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// The workflow this run belongs to (fan-out limits apply per workflow).
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    /// The run this one continues from.
    #[arg(long, value_name = "RUN")]
    pub parent: Option<String>,
    /// A repeated dispatch with the same key within 24 h returns the same run.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// Refuse (MAX_CONCURRENT) instead of queueing when the provider is busy (idle runs
    /// holding its slots hibernate to make room first).
    #[arg(long)]
    pub no_queue: bool,
    /// The simulated provider's scenario.
    #[arg(long, value_name = "NAME", long_help = scenarios_help())]
    pub scenario: Option<String>,
    /// The task class (route choices are remembered per class).
    #[arg(long, value_name = "CLASS")]
    pub class: Option<String>,
    /// A JSON Schema file: the run answers with JSON that satisfies it.
    #[arg(long, value_name = "FILE")]
    pub output_schema: Option<PathBuf>,
    /// worktree (a git worktree of its own on a new `drover/…` branch) or shared (the
    /// directory as given); default: `[workspaces] default` for a run that can write
    /// inside a git work tree, shared otherwise.
    #[arg(long, value_name = "MODE")]
    pub workspace: Option<String>,
    /// Bring your checkout's uncommitted changes (untracked files too) into the worktree.
    #[arg(long)]
    pub carry_changes: bool,
    /// Run the provider CLI in a sandbox (bubblewrap): the file system read-only but the
    /// run's directory and the CLI's own state, a private /tmp, your keys and other
    /// worktrees hidden. Refused (SANDBOX_UNAVAILABLE) where bubblewrap cannot run.
    #[arg(long)]
    pub sandbox: bool,
    /// Run the provider CLI on this `[hosts.NAME]` of your config (over ssh, in a
    /// container or a pod); --cwd is then an absolute directory there (`drover hosts`
    /// lists them, `drover doctor --host NAME` checks one).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// With a drover running: wait until the run needs you, is idle, or has ended, and exit
    /// by how it stands (0 idle or done · 4 failed, stopped or blocked · 5 needs you).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub output: JsonFlag,
}

impl DispatchArgs {
    /// The spec to send. Relative paths are resolved against `caller_dir`; the output
    /// schema file is read here (`INVALID_SPEC` when it cannot be).
    pub fn spec_input(&self, caller_dir: &Path) -> Result<SpecInput, DroverError> {
        // A host's directory is the host's: taken as written, never this machine's.
        let cwd = match (&self.cwd, &self.host) {
            (Some(dir), Some(_)) => Some(dir.clone()),
            (None, Some(_)) => None,
            (Some(dir), None) => Some(caller_dir.join(dir)),
            (None, None) => Some(caller_dir.to_path_buf()),
        };
        let output_schema = match &self.output_schema {
            Some(file) => Some(read_schema(&caller_dir.join(file))?),
            None => None,
        };
        Ok(SpecInput {
            provider: self.provider.clone(),
            model: self.model.clone(),
            effort: self.effort.clone(),
            cwd,
            task: self.task.join(" "),
            context: self.context.clone(),
            title: self.title.clone(),
            tags: self.tags.clone(),
            capability: self.capability.clone(),
            policy: self.policy.clone(),
            max_minutes: self.max_minutes,
            budget_usd: self.budget,
            idle_timeout_secs: self.idle_timeout,
            max_turns: self.max_turns,
            output_schema,
            workflow_id: self.workflow.clone(),
            parent_run: self.parent.clone(),
            idempotency_key: self.idempotency_key.clone(),
            queue_if_busy: self.no_queue.then_some(false),
            scenario: self.scenario.clone(),
            class: self.class.clone(),
            workspace: self.workspace.clone(),
            carry_changes: self.carry_changes.then_some(true),
            sandbox: self.sandbox.then_some(true),
            host: self.host.clone(),
        })
    }
}

fn read_schema(file: &Path) -> Result<Value, DroverError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        DroverError::new(
            ErrorCode::InvalidSpec,
            format!(
                "cannot read the output schema {}: {e}; give --output-schema a readable JSON file",
                file.display()
            ),
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        DroverError::new(
            ErrorCode::InvalidSpec,
            format!(
                "the output schema {} is not JSON ({e}); fix the file or drop --output-schema",
                file.display()
            ),
        )
    })
}

/// `drover dispatch`: as a client of the owner on a one-thread runtime
/// ([`super::headless::client_runtime`]), or, when no owner runs, as the owner itself on
/// the owner's runtime.
pub fn run(args: DispatchArgs, paths: &Paths) -> Result<Exit, DroverError> {
    let caller_dir = std::env::current_dir().map_err(|e| {
        DroverError::new(
            ErrorCode::CwdInvalid,
            format!(
                "cannot read the current directory: {e}; cd somewhere that exists, or pass --cwd"
            ),
        )
    })?;
    let spec = args.spec_input(&caller_dir)?;
    let json = args.output.json;
    let client = super::headless::client_runtime()?;
    if let Some(owner) = client.block_on(ControlClient::connect(paths))? {
        return client.block_on(via_owner(owner, spec, args.wait, json));
    }
    drop(client);
    super::headless::runtime()?.block_on(own(spec, args.wait, json, paths))
}

/// `drover dispatch` with no owner running: this process owns the data directory for
/// the run (or hands it to an owner that took it meanwhile).
async fn own(spec: SpecInput, wait: bool, json: bool, paths: &Paths) -> Result<Exit, DroverError> {
    let host = match Host::start(dispatcher_options(paths)?).await {
        Ok(host) => host,
        Err(e) if e.code == ErrorCode::OwnerRunning => {
            // Another drover took the directory between our look and our lock: use it.
            let client = super::headless::owner_coming_up(paths).await?.ok_or(e)?;
            return via_owner(client, spec, wait, json).await;
        }
        Err(e) => return Err(e),
    };
    let mut host = host;
    let outcome = follow(&mut host, spec, json, paths).await;
    host.shutdown().await;
    outcome
}

/// Dispatches through the owner: prints the run id (or the answer), then with `wait` the
/// run once it needs you, is idle, or has ended. A run that could not even start says
/// why.
async fn via_owner(
    mut client: ControlClient,
    spec: SpecInput,
    wait: bool,
    json: bool,
) -> Result<Exit, DroverError> {
    let run = client
        .request(Request::Dispatch {
            spec: Box::new(spec),
        })
        .await?
        .into_run()?;
    let run_id = run.head.run_id.clone();
    if json {
        print_json(&run)?;
    } else {
        write_stdout(&format!("{run_id}\n"))?;
    }
    if run.head.state.is_terminal() {
        let view = client
            .request(Request::Show { run_id })
            .await?
            .into_show()?;
        note(&ended_line(&view));
        return Ok(Exit::of_run(&run));
    }
    if !wait {
        return Ok(Exit::Done);
    }
    let outcome = client
        .request(Request::Wait {
            run_ids: vec![run_id.clone()],
            workflow: None,
            until: WaitUntil::Settled,
            any: false,
            timeout_secs: None,
        })
        .await?
        .into_wait()?;
    if json {
        print_json(&outcome)?;
    } else {
        write_stdout(&render::wait_outcome(&outcome, now_millis()))?;
    }
    if outcome.timed_out {
        return Err(DroverError::new(
            ErrorCode::WaitTimeout,
            format!(
                "{run_id} had not settled when the wait gave up; `drover wait {run_id} --until settled` waits again"
            ),
        ));
    }
    Ok(Exit::of_runs(&outcome.runs))
}

/// One line on how a run ended and why: its state, its reason, its last note.
fn ended_line(view: &RunView) -> String {
    let state = render::state_with_reason(
        view.head.state,
        Some(
            view.head
                .completion_reason
                .as_deref()
                .unwrap_or("no reason"),
        ),
    );
    let why = view
        .notes
        .last()
        .map(|n| format!(": {}", n.text))
        .unwrap_or_default();
    format!("drover: {} {state}{why}", view.head.run_id)
}

/// This process owns the dispatcher: dispatch, then print the run's events until it ends
/// or a stop signal arrives.
async fn follow(
    host: &mut Host,
    spec: SpecInput,
    json: bool,
    paths: &Paths,
) -> Result<Exit, DroverError> {
    let mut signals = StopSignals::install()?;
    let handle = host.handle().clone();
    // Before the dispatch, so the run's first events are kept for us.
    let mut events = handle.subscribe();
    let run = handle
        .request(Request::Dispatch {
            spec: Box::new(spec),
        })
        .await?
        .into_run()?;
    let run_id = run.head.run_id.clone();
    if json {
        print_json(&run)?;
    } else {
        write_stdout(&format!("{run_id}\n"))?;
        note(&format!(
            "drover: this terminal owns {} until {run_id} ends (other terminals can act on it); Ctrl-C stops it",
            paths.data_dir.display()
        ));
    }
    // A launch that failed, or a repeated idempotency key, can return a run that ended.
    if run.head.state.is_terminal() {
        let view = handle
            .request(Request::Show { run_id })
            .await?
            .into_show()?;
        note(&ended_line(&view));
        return Ok(Exit::of_run(&run));
    }
    loop {
        tokio::select! {
            signal = signals.recv() => {
                return Err(DroverError::new(
                    ErrorCode::Interrupted,
                    format!(
                        "{signal}: drover shut down; {run_id} is recorded as interrupted if it \
                         was in a turn, and comes back as it was with the next drover"
                    ),
                ));
            }
            e = host.dispatcher_ended() => return Err(e),
            received = events.recv() => match received {
                Ok(event) if event.run_id() == run_id => {
                    let event = &*event;
                    if json {
                        print_json(event)?;
                    } else {
                        write_stdout(&(render::event_line(event) + "\n"))?;
                        if let DispatchEvent::RunChanged { run } = event
                            && run.head.state == RunState::Idle
                        {
                            note(&format!(
                                "drover: {run_id} is idle and keeps its session warm: from another \
                                 terminal, `drover follow-up {run_id} TEXT` continues it and \
                                 `drover complete {run_id}` ends it; it completes by itself after \
                                 its idle timeout; Ctrl-C stops it now"
                            ));
                        }
                    }
                    if let DispatchEvent::RunChanged { run } = event
                        && run.head.state.is_terminal()
                    {
                        return Ok(Exit::of_run(run));
                    }
                    if matches!(event, DispatchEvent::RunRemoved { .. }) {
                        return Ok(Exit::Done);
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(missed)) => {
                    if json {
                        print_json(&json!({"lagged": missed}))?;
                    } else {
                        note(&format!("drover: {missed} events were missed (the terminal was slow)"));
                    }
                    // The end may have been among them.
                    let runs = handle
                        .request(Request::Wait {
                            run_ids: vec![run_id.clone()],
                            workflow: None,
                            until: WaitUntil::Terminal,
                            any: false,
                            timeout_secs: Some(0),
                        })
                        .await?
                        .into_wait()?;
                    if let Some(run) = runs.runs.first().filter(|r| r.head.state.is_terminal()) {
                        return Ok(Exit::of_run(run));
                    }
                }
                Err(RecvError::Closed) => {
                    return Err(DroverError::new(
                        ErrorCode::Internal,
                        format!("the dispatcher stopped before {run_id} ended; see the log"),
                    ));
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(argv: &[&str]) -> DispatchArgs {
        let full = ["drover", "dispatch"]
            .into_iter()
            .chain(argv.iter().copied());
        match Cli::try_parse_from(full) {
            Ok(Cli {
                command: Command::Dispatch(args),
            }) => *args,
            other => panic!("{argv:?}: {other:?}"),
        }
    }

    #[test]
    fn the_scenario_help_gives_each_shipped_scenario_its_description() {
        use drover_core::sim::scenario::{Format, builtin, builtin_names, parse};
        let help = scenarios_help();
        for name in builtin_names() {
            let text = builtin(name).unwrap();
            let about = parse(text, Format::Toml, name)
                .unwrap()
                .description
                .unwrap();
            assert!(
                help.contains(&format!("{name:<18} {about}")),
                "{name}: {about:?} in:\n{help}"
            );
        }
    }

    fn spec(argv: &[&str]) -> SpecInput {
        args(argv).spec_input(Path::new("/home/me/proj")).unwrap()
    }

    #[test]
    fn the_defaults_are_the_task_and_the_current_directory() {
        assert_eq!(
            spec(&["fix", "the", "parser"]),
            SpecInput {
                task: "fix the parser".into(),
                cwd: Some("/home/me/proj".into()),
                ..SpecInput::default()
            }
        );
    }

    #[test]
    fn every_flag_lands_in_its_spec_field() {
        let full = spec(&[
            "--provider",
            "codex",
            "--model",
            "gpt-5",
            "--effort",
            "high",
            "--cwd",
            "sub/dir",
            "--title",
            "Parser",
            "--context",
            "see issue 4",
            "--policy",
            "restricted",
            "--capability",
            "read-only",
            "--budget",
            "2.5",
            "--max-turns",
            "3",
            "--max-minutes",
            "-5",
            "--idle-timeout",
            "600",
            "--tag",
            "a",
            "--tag",
            "b",
            "--workflow",
            "wf",
            "--parent",
            "r0",
            "--idempotency-key",
            "k1",
            "--no-queue",
            "--scenario",
            "happy",
            "--class",
            "bugfix",
            "fix it",
        ]);
        assert_eq!(
            full,
            SpecInput {
                provider: Some("codex".into()),
                model: Some("gpt-5".into()),
                effort: Some("high".into()),
                cwd: Some("/home/me/proj/sub/dir".into()),
                task: "fix it".into(),
                context: Some("see issue 4".into()),
                title: Some("Parser".into()),
                tags: vec!["a".into(), "b".into()],
                capability: Some("read-only".into()),
                policy: Some("restricted".into()),
                max_minutes: Some(-5), // clamped by validation, not refused here
                budget_usd: Some(2.5),
                idle_timeout_secs: Some(600),
                max_turns: Some(3),
                output_schema: None,
                workflow_id: Some("wf".into()),
                parent_run: Some("r0".into()),
                idempotency_key: Some("k1".into()),
                queue_if_busy: Some(false),
                scenario: Some("happy".into()),
                class: Some("bugfix".into()),
                workspace: None,
                carry_changes: None,
                sandbox: None,
                host: None,
            }
        );
        assert_eq!(spec(&["--cwd", "/abs", "t"]).cwd, Some("/abs".into()));
        // Words go through raw: the dispatcher refuses them with a sentence.
        assert_eq!(
            spec(&["--policy", "yolo", "t"]).policy.as_deref(),
            Some("yolo")
        );
        let flags = args(&["--wait", "--json", "t"]);
        assert!(flags.wait && flags.output.json);
    }

    /// A host's directory is the host's: never joined with the caller's directory, and
    /// absent when not given (admission then asks for it).
    #[test]
    fn a_host_runs_cwd_is_taken_as_written() {
        let caller = std::path::Path::new("/home/me/proj");
        let on = |a: &[&str]| args(a).spec_input(caller).unwrap();
        let given = on(&["--host", "box", "--cwd", "/srv/repo", "t"]);
        assert_eq!(given.host.as_deref(), Some("box"));
        assert_eq!(given.cwd, Some("/srv/repo".into()));
        assert_eq!(
            on(&["--host", "box", "--cwd", "rel", "t"]).cwd,
            Some("rel".into())
        );
        assert_eq!(on(&["--host", "box", "t"]).cwd, None);
        assert_eq!(on(&["t"]).cwd, Some(caller.to_path_buf()));
    }

    #[test]
    fn the_output_schema_is_read_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("schema.json"), r#"{"type": "object"}"#).unwrap();
        std::fs::write(dir.path().join("bad.json"), "{type").unwrap();
        let with = |file: &str| args(&["--output-schema", file, "t"]).spec_input(dir.path());
        assert_eq!(
            with("schema.json").unwrap().output_schema,
            Some(json!({"type": "object"}))
        );
        for (file, words) in [("bad.json", "not JSON"), ("missing.json", "cannot read")] {
            let e = with(file).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidSpec);
            assert!(
                e.message.contains(words) && e.message.contains(file),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn a_task_is_required() {
        let e = Cli::try_parse_from(["drover", "dispatch", "--model", "m"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
