//! The headless run commands: `runs`, `search`, `show`, `transcript`, `follow-up`,
//! `respond`, `stop`, `complete`, `remove`, `kill-all`, `wait`.
//!
//! Each one is a dispatcher [`Request`] sent to the process that owns the data directory
//! (over the control socket). With no owner, the read-only ones (`runs`, `search`,
//! `show`, `transcript`) are answered from the ledger in the same shapes, and the others are
//! refused with `NO_OWNER` (`dispatch`, which then makes this process the owner until its
//! run ends, has its own file).
//!
//! What must stay true: `--json` prints the API's answer exactly, one JSON line per
//! answer; a refusal prints `error[CODE]: sentence` (by `main`) and exits 1; `wait`
//! exits 3 when it times out (after printing the runs as they are).

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use std::collections::BTreeMap;

use super::exit::Exit;
use super::headless::{ask, client_runtime};
use super::output::{JsonFlag, print_json, write_stdout};
use super::render;
use drover_core::clock::now_millis;
use drover_core::dispatch::api::{DEFAULT_RUNS_PAGE, TranscriptFormat, WaitUntil};
use drover_core::dispatch::{Request, Response};
use drover_core::error::{DroverError, ErrorCode};
use drover_core::paths::Paths;
use drover_core::providers::PermissionAnswer;
use drover_core::run_state::RunState;

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// List runs, newest first: every active run and the most recently finished ones (a
    /// page of 50; `--before` the last id a page printed goes on, `--all` lists every run).
    Runs {
        /// Only runs in this state (queued, running, idle, completed, …).
        #[arg(long, value_parser = parse_run_state)]
        state: Option<RunState>,
        /// Every run ever made, removed ones too, with no page limit.
        #[arg(long, conflicts_with_all = ["limit", "before"])]
        all: bool,
        /// Finished runs per page (every active run is always listed).
        #[arg(long, value_name = "N", default_value_t = DEFAULT_RUNS_PAGE)]
        limit: u32,
        /// The next page: finished runs that finished before this run did.
        #[arg(long, value_name = "RUN")]
        before: Option<String>,
        /// Only runs whose title, id, provider, model or state contains this text.
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// Only the runs of this workflow (a parent run's sub-runs are in its workflow).
        #[arg(long, value_name = "ID")]
        workflow: Option<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Search everything the ledger holds — each run's task, follow-ups and results, and
    /// its transcript's agent text and tool commands — and print each matching line with
    /// its run and time, newest runs first. The query is FTS5's: words (all of them),
    /// "a phrase", prefix*, OR, NOT; quote a word with - or : in it ('"staging-eu"').
    Search {
        /// What to search for (words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Lines at most (at most 500).
        #[arg(long, value_name = "N", default_value_t = drover_core::ledger::SEARCH_LIMIT_DEFAULT,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(drover_core::ledger::SEARCH_LIMIT_MAX)))]
        limit: u32,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Everything about one run.
    Show {
        run: String,
        /// Print only the ids of its pending requests, oldest first, one per line (for
        /// scripts: `drover respond RUN "$(drover show RUN --pending | sed -n 1p)" allow`).
        #[arg(long, conflicts_with = "json")]
        pending: bool,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// A run's transcript.
    Transcript {
        run: String,
        /// result: the last result block; text: each turn's answer; tail: one line per
        /// provider event; events: every recorded event.
        #[arg(long, value_enum, default_value_t = FormatArg::Tail)]
        format: FormatArg,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Send the next prompt to an idle run (queued if a turn is running).
    FollowUp {
        run: String,
        /// The prompt (words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Start a run that a drover restart interrupted again, in the same provider
    /// session; the new turn is recorded on the same run. Also wakes a hibernated run,
    /// or sends a turn held for the model API again now.
    Resume {
        run: String,
        /// The new turn's prompt (words are joined with spaces); by default drover asks
        /// the agent to check what it had done and carry on.
        text: Vec<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Start a hibernated run's CLI in its provider session now, with no turn, so that
    /// the follow-up sent next starts at once (the dashboard does this when its
    /// follow-up box opens). It hibernates again after `hibernate_after_secs` unused.
    Wake {
        run: String,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Answer a run's permission request or question.
    Respond(RespondArgs),
    /// Stop a run (pending requests are denied). With --soft it is asked to wrap up
    /// first: one turn to write its result block, then it ends (`stopped_soft`).
    Stop {
        run: String,
        /// Wrap up, then stop: the turn in flight ends, the run writes its final answer,
        /// and the hard stop follows only if that overruns (`[limits] wrap_up_bound_secs`).
        #[arg(long)]
        soft: bool,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// End an idle run as complete.
    Complete {
        run: String,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Remove a finished run (or every finished run) from the trays; its spend still counts.
    Remove(RemoveArgs),
    /// Clean up in bulk: every finished run whose worktree holds no change leaves the
    /// trays (its worktree and its branch, when it holds no commits beyond its base, are
    /// deleted), without asking; those with unmerged work are listed and kept (`remove
    /// --finished --force` keeps their work on their branches and removes them).
    Gc {
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Stop every active, queued and held run (of one workflow with --workflow).
    KillAll {
        /// Only the runs of this workflow.
        #[arg(long, value_name = "ID")]
        workflow: Option<String>,
        #[command(flatten)]
        output: JsonFlag,
    },
    /// Wait until runs need you, are idle, have ended, or have news.
    ///
    #[command(after_help = super::exit::TABLE)]
    Wait(WaitArgs),
}

impl RunCommand {
    /// Whether the command only reads (runs, show, transcript, wait).
    pub fn read_only(&self) -> bool {
        matches!(
            self,
            RunCommand::Runs { .. }
                | RunCommand::Show { .. }
                | RunCommand::Transcript { .. }
                | RunCommand::Wait(_)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Result,
    Text,
    Tail,
    Events,
}

impl From<FormatArg> for TranscriptFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Result => TranscriptFormat::Result,
            FormatArg::Text => TranscriptFormat::Text,
            FormatArg::Tail => TranscriptFormat::Tail,
            FormatArg::Events => TranscriptFormat::Events,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Decision {
    /// Allow this once.
    Allow,
    /// Allow this and the same again for the rest of the run's session.
    Always,
    Deny,
}

#[derive(Debug, Args)]
pub struct RespondArgs {
    pub run: String,
    /// The request id shown with the prompt (`drover show RUN` lists them).
    pub request_id: String,
    /// allow, always or deny (not with --answer).
    #[arg(
        value_enum,
        required_unless_present = "answers",
        conflicts_with = "answers"
    )]
    pub decision: Option<Decision>,
    /// Why it is denied (with deny).
    #[arg(long, conflicts_with = "answers")]
    pub message: Option<String>,
    /// Answer a question: the question (or option key) and the answer. Repeatable.
    #[arg(long = "answer", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub answers: Vec<(String, String)>,
    #[command(flatten)]
    pub output: JsonFlag,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["run", "finished"])))]
pub struct RemoveArgs {
    pub run: Option<String>,
    /// Every finished run (those whose worktree holds unmerged work stay, unless --force).
    #[arg(long)]
    pub finished: bool,
    /// Remove it even though its worktree holds unmerged work: the work is committed onto
    /// its branch, which stays; the worktree goes.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub output: JsonFlag,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UntilArg {
    /// The run needs you: a permission, a question, a route card, a result asking for
    /// input (or it ended).
    NeedsYou,
    /// The turn ended and the run waits for a follow-up (or it ended); a run waiting on a
    /// permission is not idle.
    Idle,
    /// Whichever comes first: needs you, idle, or ended.
    Settled,
    /// Ended.
    Terminal,
    /// Anything happened.
    Event,
}

impl From<UntilArg> for WaitUntil {
    fn from(until: UntilArg) -> Self {
        match until {
            UntilArg::NeedsYou => WaitUntil::NeedsYou,
            UntilArg::Idle => WaitUntil::Idle,
            UntilArg::Settled => WaitUntil::Settled,
            UntilArg::Terminal => WaitUntil::Terminal,
            UntilArg::Event => WaitUntil::Event,
        }
    }
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The runs to wait for.
    #[arg(required_unless_present = "workflow", value_name = "RUN")]
    pub runs: Vec<String>,
    /// Also every run of this workflow (as it stands when the wait starts), however many.
    #[arg(long, value_name = "ID")]
    pub workflow: Option<String>,
    #[arg(long, value_enum, default_value_t = UntilArg::Terminal)]
    pub until: UntilArg,
    /// Done when any of the runs is (default: all of them).
    #[arg(long)]
    pub any: bool,
    /// Give up after this many seconds (exit code 3).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    #[command(flatten)]
    pub output: JsonFlag,
}

fn parse_run_state(word: &str) -> Result<RunState, String> {
    RunState::parse(word).ok_or_else(|| {
        let known: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
        format!("use one of {}", known.join(", "))
    })
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err("write it as KEY=VALUE (the question, `=`, your answer)".into()),
    }
}

/// The answer `respond` sends. `Err` is a usage mistake clap cannot see.
pub fn permission_answer(args: &RespondArgs) -> Result<PermissionAnswer, String> {
    if !args.answers.is_empty() {
        let answers: BTreeMap<String, String> = args.answers.iter().cloned().collect();
        return Ok(PermissionAnswer::Answer { answers });
    }
    match (args.decision, &args.message) {
        (Some(Decision::Deny), message) => Ok(PermissionAnswer::Deny {
            message: message.clone(),
        }),
        (Some(Decision::Allow | Decision::Always), Some(_)) => {
            Err("--message goes with deny; drop it, or deny".into())
        }
        (Some(Decision::Allow), None) => Ok(PermissionAnswer::Allow { always: false }),
        (Some(Decision::Always), None) => Ok(PermissionAnswer::Allow { always: true }),
        (None, _) => Err("say allow, always or deny, or give --answer KEY=VALUE".into()),
    }
}

impl RunCommand {
    /// The request this command sends (`dispatch` builds its own: it reads files).
    pub fn request(&self) -> Result<Option<Request>, String> {
        let request = match self {
            RunCommand::Runs {
                state,
                all,
                workflow,
                limit,
                before,
                search,
                ..
            } => Request::Runs {
                state: *state,
                include_removed: *all,
                workflow: workflow.clone(),
                limit: (!*all).then_some(*limit),
                before: before.clone(),
                search: search.clone(),
            },
            RunCommand::Search { query, limit, .. } => Request::Search {
                query: query.join(" "),
                limit: Some(*limit),
            },
            RunCommand::Show { run, .. } => Request::Show {
                run_id: run.clone(),
            },
            RunCommand::Transcript { run, format, .. } => Request::Transcript {
                run_id: run.clone(),
                format: (*format).into(),
            },
            RunCommand::FollowUp { run, text, .. } => Request::FollowUp {
                run_id: run.clone(),
                text: text.join(" "),
            },
            RunCommand::Resume { run, text, .. } => Request::Resume {
                run_id: run.clone(),
                text: (!text.is_empty()).then(|| text.join(" ")),
            },
            RunCommand::Wake { run, .. } => Request::Wake {
                run_id: run.clone(),
            },
            RunCommand::Respond(args) => Request::Respond {
                run_id: args.run.clone(),
                request_id: args.request_id.clone(),
                answer: permission_answer(args)?,
            },
            RunCommand::Stop {
                run, soft: true, ..
            } => Request::WrapUp {
                run_id: run.clone(),
            },
            RunCommand::Stop { run, .. } => Request::Stop {
                run_id: run.clone(),
            },
            RunCommand::Complete { run, .. } => Request::Complete {
                run_id: run.clone(),
            },
            RunCommand::Remove(args) => Request::Remove {
                run_id: args.run.clone(),
                finished: args.finished,
                force: args.force,
            },
            RunCommand::Gc { .. } => Request::Remove {
                run_id: None,
                finished: true,
                force: false,
            },
            RunCommand::KillAll { workflow, .. } => Request::KillAll {
                workflow: workflow.clone(),
            },
            RunCommand::Wait(args) => Request::Wait {
                run_ids: args.runs.clone(),
                workflow: args.workflow.clone(),
                until: args.until.into(),
                any: args.any,
                timeout_secs: args.timeout,
            },
        };
        Ok(Some(request))
    }

    /// The subcommand's name on the command line (and in the log).
    pub fn name(&self) -> &'static str {
        match self {
            RunCommand::Runs { .. } => "runs",
            RunCommand::Search { .. } => "search",
            RunCommand::Show { .. } => "show",
            RunCommand::Transcript { .. } => "transcript",
            RunCommand::FollowUp { .. } => "follow-up",
            RunCommand::Resume { .. } => "resume",
            RunCommand::Wake { .. } => "wake",
            RunCommand::Respond(_) => "respond",
            RunCommand::Stop { .. } => "stop",
            RunCommand::Complete { .. } => "complete",
            RunCommand::Remove(_) => "remove",
            RunCommand::Gc { .. } => "gc",
            RunCommand::KillAll { .. } => "kill-all",
            RunCommand::Wait(_) => "wait",
        }
    }

    fn json(&self) -> bool {
        match self {
            RunCommand::Runs { output, .. }
            | RunCommand::Search { output, .. }
            | RunCommand::Show { output, .. }
            | RunCommand::Transcript { output, .. }
            | RunCommand::FollowUp { output, .. }
            | RunCommand::Resume { output, .. }
            | RunCommand::Wake { output, .. }
            | RunCommand::Stop { output, .. }
            | RunCommand::Complete { output, .. }
            | RunCommand::KillAll { output, .. }
            | RunCommand::Gc { output } => output.json,
            RunCommand::Respond(RespondArgs { output, .. })
            | RunCommand::Remove(RemoveArgs { output, .. })
            | RunCommand::Wait(WaitArgs { output, .. }) => output.json,
        }
    }
}

/// Runs one run command.
pub fn run(command: RunCommand, paths: &Paths) -> Result<Exit, DroverError> {
    let request = match command.request() {
        Ok(Some(request)) => request,
        Ok(None) => {
            return Err(DroverError::new(
                ErrorCode::Internal,
                "this command has no request of its own",
            ));
        }
        Err(usage) => {
            // The run commands alone, under drover's name: the usage clap prints is theirs.
            let mut root =
                <RunCommand as Subcommand>::augment_subcommands(clap::Command::new("drover"));
            root.build();
            let kind = clap::error::ErrorKind::ArgumentConflict;
            match root.find_subcommand_mut(command.name()) {
                Some(sub) => sub.error(kind, usage).exit(),
                None => root.error(kind, usage).exit(),
            }
        }
    };
    let json = command.json();
    let runtime = client_runtime()?;
    let request = match (&command, request) {
        (
            RunCommand::Respond(_),
            Request::Respond {
                run_id,
                request_id,
                answer,
            },
        ) => {
            let request_id = runtime.block_on(full_request_id(paths, &run_id, &request_id))?;
            Request::Respond {
                run_id,
                request_id,
                answer,
            }
        }
        (_, request) => request,
    };
    let answer = runtime.block_on(ask(paths, request.clone()))?;
    if let (RunCommand::Show { pending: true, .. }, Response::Show(view)) = (&command, &answer) {
        let ids: String = view
            .pending
            .iter()
            .map(|p| format!("{}\n", p.request_id))
            .collect();
        write_stdout(&ids)?;
    } else if json {
        print_json(&answer)?;
    } else {
        write_stdout(&human(&request, &answer))?;
    }
    match (&request, &answer) {
        (
            Request::Wait {
                until,
                timeout_secs,
                ..
            },
            Response::Wait(w),
        ) if w.timed_out => Err(wait_timed_out(*until, *timeout_secs)),
        (Request::Wait { .. }, Response::Wait(w)) => Ok(Exit::of_runs(&w.runs)),
        _ => Ok(Exit::Done),
    }
}

/// The pending request of `run_id` that `given` names: its id, or a prefix of exactly
/// one pending request's id. An id that is not pending is sent as given (the owner says
/// what became of it).
async fn full_request_id(paths: &Paths, run_id: &str, given: &str) -> Result<String, DroverError> {
    let view = match ask(
        paths,
        Request::Show {
            run_id: run_id.to_string(),
        },
    )
    .await?
    {
        Response::Show(view) => view,
        _ => return Ok(given.to_string()),
    };
    let ids: Vec<&str> = view.pending.iter().map(|p| p.request_id.as_str()).collect();
    resolve_prefix(&ids, run_id, given)
}

/// `given` as one of `ids`: itself, or the one id it is a prefix of.
fn resolve_prefix(ids: &[&str], run_id: &str, given: &str) -> Result<String, DroverError> {
    if ids.contains(&given) {
        return Ok(given.to_string());
    }
    let matching: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| !given.is_empty() && id.starts_with(given))
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => Ok(given.to_string()),
        many => Err(DroverError::new(
            ErrorCode::NoPendingRequest,
            format!(
                "{given:?} starts {} of run {run_id}'s pending requests ({}); give more of the id",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

pub(crate) fn wait_timed_out(until: WaitUntil, timeout_secs: Option<u64>) -> DroverError {
    let within = match timeout_secs {
        Some(secs) => format!("within {secs} s"),
        None => "before the wait's cap".to_string(),
    };
    DroverError::new(
        ErrorCode::WaitTimeout,
        format!(
            "the runs were not {} {within}; wait again, or raise --timeout",
            until.words()
        ),
    )
}

/// The line under a full page of `drover runs`: how to see the next one. The page's
/// last run is the one that finished first (pages go by finish time).
fn more_runs(runs: &[drover_core::dispatch::api::RunSummary], request: &Request) -> String {
    let Some(filter) = drover_core::dispatch::api::RunsFilter::of(request) else {
        return String::new();
    };
    match (filter.next_before(runs), filter.limit) {
        (Some(last), Some(limit)) => format!(
            "{limit} finished runs shown; older ones: `drover runs --before {last}` (or `--all`)\n"
        ),
        _ => String::new(),
    }
}

/// The human form of an answer.
fn human(request: &Request, answer: &Response) -> String {
    let now = now_millis();
    match (answer, request) {
        (Response::Runs(runs), _) => {
            let mut out = render::runs_table(runs, now);
            out.push_str(&more_runs(runs, request));
            out
        }
        (Response::Search(view), _) => render::search(view, now),
        (Response::Show(run), _) => render::run_view(run, now),
        (Response::Transcript(view), _) => render::transcript(view),
        (Response::Wait(outcome), _) => render::wait_outcome(outcome, now),
        (_, Request::FollowUp { run_id, .. }) => format!("follow-up sent to {run_id}\n"),
        (_, Request::Resume { run_id, .. }) => format!(
            "resuming {run_id} in its provider session; watch it with `drover show {run_id}`\n"
        ),
        (Response::Run(run), Request::Wake { run_id }) => {
            let live = run
                .head
                .live_state
                .as_ref()
                .and_then(|l| l.detail.as_deref());
            if live.is_some_and(|d| d.starts_with(drover_core::dispatch::core::WAKING_DETAIL)) {
                format!("waking {run_id}: its CLI starts in its provider session\n")
            } else {
                format!(
                    "{run_id} is not woken ahead ({}): a follow-up wakes it when it needs to\n",
                    live.unwrap_or(run.head.state.as_str())
                )
            }
        }
        (
            _,
            Request::Respond {
                run_id,
                request_id,
                answer: how,
            },
        ) => {
            let how = match how {
                PermissionAnswer::Allow { always: false } => "allowed",
                PermissionAnswer::Allow { always: true } => "allowed always",
                PermissionAnswer::Deny { .. } => "denied",
                PermissionAnswer::Answer { .. } => "answered",
            };
            format!("{how} request {request_id} of {run_id}\n")
        }
        (_, Request::Stop { run_id }) => format!("stopping {run_id}\n"),
        (_, Request::WrapUp { run_id }) => {
            format!("wrapping up {run_id}: it writes its final answer, then stops\n")
        }
        (_, Request::Complete { run_id }) => format!("completing {run_id}\n"),
        (
            answer,
            Request::Remove {
                run_id: Some(run_id),
                ..
            },
        ) => {
            let mut text = format!("removed {run_id} from the trays\n");
            if let Response::Removed(removed) = answer {
                text.push_str(&kept_branches(removed));
            }
            text
        }
        (Response::Removed(removed), Request::Remove { run_id: None, .. }) => {
            let mut text = format!(
                "removed {} finished run{} from the trays\n",
                removed.removed.len(),
                drover_core::text::plural(removed.removed.len())
            );
            if !removed.unmerged.is_empty() {
                text.push_str(&format!(
                    "kept {} with unmerged work in their worktrees (merge, keep or discard them, or remove --finished --force): {}\n",
                    removed.unmerged.len(),
                    removed.unmerged.join(" ")
                ));
            }
            text.push_str(&kept_branches(removed));
            text
        }
        (_, Request::Remove { run_id: None, .. }) => {
            "removed the finished runs from the trays\n".to_string()
        }
        (_, Request::KillAll { workflow: None }) => {
            "stopping every active, queued and held run\n".to_string()
        }
        (
            _,
            Request::KillAll {
                workflow: Some(workflow),
            },
        ) => format!("stopping every active, queued and held run of workflow {workflow}\n"),
        _ => render::pretty_json(answer),
    }
}

/// One line per removed run whose branch keeps its unmerged work.
fn kept_branches(removed: &drover_core::dispatch::api::Removed) -> String {
    removed
        .kept
        .iter()
        .map(|k| {
            format!(
                "{}'s unmerged work is kept on branch {}: merge it with git, or delete it with `git branch -D {}`\n",
                k.run_id, k.branch, k.branch
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn command(args: &[&str]) -> RunCommand {
        let argv = std::iter::once("drover").chain(args.iter().copied());
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Run(command),
            }) => command,
            Ok(other) => panic!("{args:?} parsed as {other:?}"),
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    fn request(args: &[&str]) -> Request {
        command(args).request().unwrap().unwrap()
    }

    fn usage_error(args: &[&str]) -> clap::error::ErrorKind {
        let argv = std::iter::once("drover").chain(args.iter().copied());
        Cli::try_parse_from(argv).unwrap_err().kind()
    }

    #[test]
    fn each_command_line_maps_to_its_request() {
        let r = || "r1".to_string();
        let cases: Vec<(&[&str], Request)> = vec![
            (
                &["runs"],
                Request::Runs {
                    state: None,
                    include_removed: false,
                    workflow: None,
                    limit: Some(DEFAULT_RUNS_PAGE),
                    before: None,
                    search: None,
                },
            ),
            (
                &["runs", "--state", "awaiting_permission", "--all", "--json"],
                Request::Runs {
                    state: Some(RunState::AwaitingPermission),
                    include_removed: true,
                    workflow: None,
                    limit: None,
                    before: None,
                    search: None,
                },
            ),
            (&["show", "r1"], Request::Show { run_id: r() }),
            (
                &["transcript", "r1"],
                Request::Transcript {
                    run_id: r(),
                    format: TranscriptFormat::Tail,
                },
            ),
            (
                &["transcript", "r1", "--format", "events"],
                Request::Transcript {
                    run_id: r(),
                    format: TranscriptFormat::Events,
                },
            ),
            (
                &["follow-up", "r1", "also", "fix", "the tests"],
                Request::FollowUp {
                    run_id: r(),
                    text: "also fix the tests".into(),
                },
            ),
            (&["stop", "r1"], Request::Stop { run_id: r() }),
            (&["stop", "r1", "--soft"], Request::WrapUp { run_id: r() }),
            (&["complete", "r1"], Request::Complete { run_id: r() }),
            (
                &["remove", "r1"],
                Request::Remove {
                    run_id: Some(r()),
                    finished: false,
                    force: false,
                },
            ),
            (
                &["remove", "--finished"],
                Request::Remove {
                    run_id: None,
                    finished: true,
                    force: false,
                },
            ),
            (&["kill-all"], Request::KillAll { workflow: None }),
            (
                &["wait", "r1", "r2"],
                Request::Wait {
                    run_ids: vec![r(), "r2".into()],
                    workflow: None,
                    until: WaitUntil::Terminal,
                    any: false,
                    timeout_secs: None,
                },
            ),
            (
                &["wait", "r1", "--until", "idle", "--any", "--timeout", "30"],
                Request::Wait {
                    run_ids: vec![r()],
                    workflow: None,
                    until: WaitUntil::Idle,
                    any: true,
                    timeout_secs: Some(30),
                },
            ),
            (
                &["wait", "--workflow", "w1"],
                Request::Wait {
                    run_ids: vec![],
                    workflow: Some("w1".into()),
                    until: WaitUntil::Terminal,
                    any: false,
                    timeout_secs: None,
                },
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(request(args), expected, "{args:?}");
        }
        assert!(command(&["show", "r1", "--json"]).json());
        for (args, name) in [
            (&["follow-up", "r1", "x"][..], "follow-up"),
            (&["kill-all"], "kill-all"),
            (&["respond", "r1", "q1", "deny"], "respond"),
        ] {
            assert_eq!(command(args).name(), name);
        }
        assert!(!command(&["show", "r1"]).json());
    }

    #[test]
    fn a_request_id_may_be_a_unique_prefix() {
        let ids = ["req_a1b2", "req_a1c3", "req_x9"];
        assert_eq!(resolve_prefix(&ids, "r1", "req_x").unwrap(), "req_x9");
        assert_eq!(resolve_prefix(&ids, "r1", "req_a1b2").unwrap(), "req_a1b2");
        let e = resolve_prefix(&ids, "r1", "req_a1").unwrap_err();
        assert_eq!(e.code, ErrorCode::NoPendingRequest);
        assert!(e.message.contains("give more of the id"), "{}", e.message);
        // Not pending at all: sent as given, for the owner to say what became of it.
        assert_eq!(resolve_prefix(&ids, "r1", "zzz").unwrap(), "zzz");
        assert_eq!(resolve_prefix(&ids, "r1", "").unwrap(), "");
    }

    #[test]
    fn respond_maps_decisions_messages_and_answers() {
        let answer = |args: &[&str]| match request(args) {
            Request::Respond {
                run_id,
                request_id,
                answer,
            } => {
                assert_eq!((run_id.as_str(), request_id.as_str()), ("r1", "q1"));
                answer
            }
            other => panic!("{other:?}"),
        };
        let cases: Vec<(&[&str], PermissionAnswer)> = vec![
            (
                &["respond", "r1", "q1", "allow"],
                PermissionAnswer::Allow { always: false },
            ),
            (
                &["respond", "r1", "q1", "always"],
                PermissionAnswer::Allow { always: true },
            ),
            (
                &["respond", "r1", "q1", "deny"],
                PermissionAnswer::Deny { message: None },
            ),
            (
                &["respond", "r1", "q1", "deny", "--message", "not there"],
                PermissionAnswer::Deny {
                    message: Some("not there".into()),
                },
            ),
            (
                &[
                    "respond",
                    "r1",
                    "q1",
                    "--answer",
                    "Which db?=postgres",
                    "--answer",
                    "size=a=b",
                ],
                PermissionAnswer::Answer {
                    answers: BTreeMap::from([
                        ("Which db?".to_string(), "postgres".to_string()),
                        ("size".to_string(), "a=b".to_string()),
                    ]),
                },
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(answer(args), expected, "{args:?}");
        }
        // A message with allow is a usage mistake clap cannot see.
        let allow_with_message = command(&["respond", "r1", "q1", "allow", "--message", "x"]);
        assert!(allow_with_message.request().unwrap_err().contains("deny"));
    }

    #[test]
    fn usage_mistakes_are_refused_by_the_parser() {
        use clap::error::ErrorKind;
        let cases: &[(&[&str], ErrorKind)] = &[
            (&["respond", "r1", "q1"], ErrorKind::MissingRequiredArgument),
            (
                &["respond", "r1", "q1", "allow", "--answer", "k=v"],
                ErrorKind::ArgumentConflict,
            ),
            (&["respond", "r1", "q1", "maybe"], ErrorKind::InvalidValue),
            (
                &["respond", "r1", "q1", "--answer", "novalue"],
                ErrorKind::ValueValidation,
            ),
            (&["remove"], ErrorKind::MissingRequiredArgument),
            (&["remove", "r1", "--finished"], ErrorKind::ArgumentConflict),
            (&["runs", "--state", "sleeping"], ErrorKind::ValueValidation),
            (&["wait"], ErrorKind::MissingRequiredArgument),
            (&["wait", "r1", "--until", "soon"], ErrorKind::InvalidValue),
            (
                &["transcript", "r1", "--format", "html"],
                ErrorKind::InvalidValue,
            ),
            (&["follow-up", "r1"], ErrorKind::MissingRequiredArgument),
        ];
        for (args, kind) in cases {
            assert_eq!(usage_error(args), *kind, "{args:?}");
        }
    }

    #[test]
    fn a_timed_out_wait_names_its_condition_and_exits_3() {
        let e = wait_timed_out(WaitUntil::Idle, Some(30));
        assert_eq!(e.code, ErrorCode::WaitTimeout);
        assert_eq!(
            e.message,
            "the runs were not idle within 30 s; wait again, or raise --timeout"
        );
        assert_eq!(crate::cli::exit::of_error(&e), 3);
        for (code, exit) in [
            (ErrorCode::Interrupted, 130),
            (ErrorCode::NoOwner, 1),
            (ErrorCode::RunNotFound, 1),
            (ErrorCode::OwnerUnresponsive, 1),
        ] {
            assert_eq!(
                crate::cli::exit::of_error(&DroverError::new(code, "x")),
                exit
            );
        }
    }
}
