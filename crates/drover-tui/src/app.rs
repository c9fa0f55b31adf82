//! The dashboard's state machine: the view model, the stack of views and the key table.
//!
//! [`App::handle`] takes one [`AppEvent`] and returns the [`Effect`]s to carry out; it
//! never awaits, never reads the clock (the loop sets `model.now`) and never touches
//! the ledger, so the whole dashboard can be driven by tests without a terminal.
//!
//! What must stay true:
//! - keys go to the top view of the stack, or to the dashboard when the stack is empty;
//! - a key answers a request only once it has been on screen, unchanged, for
//!   `[dashboard] answer_guard_ms` ([`crate::shown`], read at `model.now`): the
//!   attention line's keys ask [`App::may_answer`], and a prompt on top is told before
//!   each key whether its request may be answered;
//! - an answer or a dispatcher event reaches the views waiting for it by their type on
//!   the stack ([`ViewStack::position`], [`ViewStack::each_mut`]); views are opened here
//!   (and in `attention.rs`, `redispatch.rs`), and nowhere else;
//! - fetches are coalesced: at most one `Show` per run and one `Budget` in flight, with
//!   one more sent afterwards if something changed meanwhile;
//! - the selected run's detail and transcript are fetched when it is selected and kept
//!   fresh by events; a run whose pending count is not matched by known requests has its
//!   view fetched, so the prompt queue is complete even for requests made before the
//!   dashboard subscribed.

mod attention;
mod redispatch;
mod transcript;

pub use attention::numbered_question;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, MouseButton, MouseEvent, MouseEventKind};
use std::collections::HashSet;
use std::path::PathBuf;

use super::event::{AppEvent, Effect, OpenIn, ReplyTag};
use super::keys::{Action, Context, KeyTable};
use super::model::{FINISHED_PAGE, Flash, Pane, ViewModel};
use super::shown::Shown;
use super::views::confirm::{ConfirmView, Confirmable};
use super::views::diff::{DiffScreen, DiffState};
use super::views::form::DispatchForm;
use super::views::help::HelpView;
use super::views::input::{InputBox, InputPurpose};
use super::views::prompt::{PromptState, PromptView};
use super::views::route::{RouteState, RouteView};
use super::views::scripts::ScriptsView;
use super::views::spend::{self, SpendScreen};
use super::views::{Outcome, ViewCommand, ViewStack};
use drover_core::DroverError;
use drover_core::UnixMillis;
use drover_core::config::DashboardOwner;
use drover_core::dispatch::api::{PendingView, RunSummary, TranscriptFormat};
use drover_core::dispatch::{DispatchEvent, Request, Response};
use drover_core::error::ErrorCode;
use drover_core::route::EscalationKind;
use drover_core::run_state::RunState;
use drover_core::text::plural;
use drover_core::workspace::WorkspaceView;
use drover_core::workspace::open::Program;

/// Lines a page key moves the transcript.
const PAGE_LINES: usize = 10;
/// Lines a mouse wheel step moves the transcript.
const WHEEL_LINES: usize = 3;

/// What the dashboard is started with.
#[derive(Debug, Clone)]
pub struct AppOptions {
    /// Provider names offered by the dispatch form.
    pub providers: Vec<String>,
    /// The provider the form starts on.
    pub default_provider: String,
    /// Providers whose CLI is not found on this machine (the form marks them).
    pub missing_providers: Vec<String>,
    /// The form's working directory (the directory drover was started in).
    pub cwd: PathBuf,
    /// Scenario names offered for the simulated provider.
    pub scenarios: Vec<String>,
    /// The configured hosts (`[hosts]`), offered by the form besides this machine.
    pub hosts: Vec<String>,
    /// The budget a dispatch without one gets (`[limits] budget_usd_default`), shown by
    /// the form.
    pub default_budget_usd: f64,
    /// The catalog's models, for the form's model picker.
    pub models: Vec<super::views::form::ModelOption>,
    /// Ring the bell and post an OSC 9 notification when a run starts needing the user
    /// (the owner sends the desktop notification, the command and the webhook).
    pub notify: bool,
    pub keys: KeyTable,
    /// Who owns the runs: leaving a background owner's dashboard leaves the runs going;
    /// leaving an in-process one stops them (after asking).
    pub owner: DashboardOwner,
    /// How long a request must have been on screen, unchanged, before a key may answer
    /// it (`[dashboard] answer_guard_ms`).
    pub answer_guard_ms: u64,
    /// The variables `o` and `!` read (`VISUAL`, `EDITOR`, `SHELL`, `TMUX`), as the
    /// dashboard started with them.
    pub open_env: std::collections::BTreeMap<String, String>,
    /// Inside tmux, where `o` and `!` open (`[dashboard] open_in`).
    pub open_in: drover_core::workspace::open::TmuxPlace,
    /// This drover's executable and data directory: `T` runs `drover attach` with them.
    pub drover_exe: PathBuf,
    pub data_dir: PathBuf,
}

impl AppOptions {
    pub fn new(cwd: PathBuf) -> Self {
        AppOptions {
            providers: vec!["claude-code".into(), "sim".into()],
            default_provider: "claude-code".into(),
            missing_providers: Vec::new(),
            hosts: Vec::new(),
            cwd,
            scenarios: drover_core::sim::scenario::builtin_names()
                .into_iter()
                .map(str::to_string)
                .collect(),
            default_budget_usd: drover_core::config::Config::defaults()
                .limits
                .budget_usd_default,
            models: super::views::form::ModelOption::of_catalog(
                &drover_core::money::Catalog::embedded(),
            ),
            notify: true,
            keys: KeyTable::defaults(),
            owner: DashboardOwner::Background,
            answer_guard_ms: drover_core::config::Config::defaults()
                .dashboard
                .answer_guard_ms,
            open_env: Default::default(),
            drover_exe: "drover".into(),
            data_dir: PathBuf::new(),
            open_in: Default::default(),
        }
    }

    /// The variables `o` and `!` read, from this process's environment.
    pub fn open_env_of_process() -> std::collections::BTreeMap<String, String> {
        ["VISUAL", "EDITOR", "SHELL", "TMUX"]
            .into_iter()
            .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
            .collect()
    }
}

pub struct App {
    pub model: ViewModel,
    /// The views over the dashboard; the top one gets the keys.
    pub views: ViewStack,
    pub keys: KeyTable,
    options: AppOptions,
    show_in_flight: HashSet<String>,
    show_again: HashSet<String>,
    budget_in_flight: bool,
    budget_again: bool,
    runs_in_flight: bool,
    /// The first list of runs has been answered (or refused): the runner holds the first
    /// frame back until then ([`App::first_runs_pending`]).
    listed_once: bool,
    /// A page of older finished runs is on its way.
    older_in_flight: bool,
    quitting: bool,
    /// Runs whose view is wanted (a route card opened before its card was known).
    want_show: Vec<String>,
    /// What the attention line showed, and the answer on its way for it.
    attention: attention::Attention,
    /// What each frame showed of the pending requests, and since when (the answer guard).
    shown: Shown,
}

impl App {
    pub fn new(options: AppOptions, model: ViewModel) -> Self {
        App {
            model,
            views: ViewStack::default(),
            keys: options.keys.clone(),
            options,
            show_in_flight: HashSet::new(),
            show_again: HashSet::new(),
            budget_in_flight: false,
            budget_again: false,
            runs_in_flight: false,
            listed_once: false,
            older_in_flight: false,
            quitting: false,
            want_show: Vec::new(),
            attention: attention::Attention::default(),
            shown: Shown::default(),
        }
    }

    /// What the frames showed of the pending requests (drawing records into it).
    pub fn shown(&self) -> &Shown {
        &self.shown
    }

    /// Whether a key may answer `request` now: it has been on screen, with these words,
    /// for at least `[dashboard] answer_guard_ms`.
    pub fn may_answer(&self, request: &PendingView) -> bool {
        self.shown
            .readable(request, self.model.now, self.options.answer_guard_ms)
    }

    /// The first fetches: every run and the session's money.
    pub fn start(&mut self) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.fetch_runs(&mut effects);
        self.fetch_budget(&mut effects);
        effects
    }

    /// Whether the first list of runs is still on its way while the owner is not known to
    /// be gone: the runner draws the first frame once it is here (a short while at most),
    /// so that frame shows the runs rather than an empty dashboard a frame gap before
    /// them.
    pub fn first_runs_pending(&self) -> bool {
        !self.listed_once && self.model.owner_gone_since.is_none()
    }

    /// Whether the app has asked to quit.
    pub fn quitting(&self) -> bool {
        self.quitting
    }

    /// The key table in force now: the top view's, or the dashboard's.
    pub fn context(&self) -> Context {
        self.views
            .top()
            .map_or(Context::Dashboard, |top| top.context())
    }

    /// Whether something on screen counts down (so a frame is due every second).
    pub fn has_countdowns(&self) -> bool {
        self.model.owner_gone_since.is_some()
            || self.views.iter().any(|v| v.counts_down())
            || self.model.runs().any(|e| {
                e.summary.head.state.is_active()
                    && (e
                        .summary
                        .head
                        .live_state
                        .as_ref()
                        .is_some_and(|l| l.bound.is_some())
                        || !e.pending.is_empty())
            })
    }

    pub fn handle(&mut self, event: AppEvent) -> Vec<Effect> {
        let selected_before = self.model.selected().map(str::to_string);
        let mut effects = Vec::new();
        match event {
            AppEvent::Key(key) if key.kind != KeyEventKind::Release => {
                self.on_key(key, &mut effects)
            }
            AppEvent::Key(_) => {}
            AppEvent::Mouse(mouse) => self.on_mouse(mouse),
            AppEvent::Resize { width, height } => {
                self.model.width = width;
                self.model.height = height;
                self.model.keep_selection_visible();
                if self.model.areas().detail.width == 0 {
                    self.model.focus = Pane::List;
                }
            }
            AppEvent::Dispatch(event) => self.on_dispatch_event(&event, &mut effects),
            AppEvent::OwnerGone => {
                if self.model.owner_gone_since.is_none() {
                    self.model.owner_gone_since = Some(self.model.now);
                }
            }
            AppEvent::OwnerBack { resumed } => {
                let was_gone = self.model.owner_gone_since.take().is_some();
                if was_gone {
                    self.flash_info("drover is back".into());
                }
                if !resumed {
                    self.refetch(&mut effects);
                }
            }
            AppEvent::Lagged | AppEvent::Tick => self.refetch(&mut effects),
            AppEvent::Reply { tag, result } => self.on_reply(tag, result, &mut effects),
            AppEvent::Terminate => {
                self.quitting = true;
                effects.push(Effect::Quit);
            }
            AppEvent::Opened(Ok(said)) => self.flash_info(said),
            AppEvent::Opened(Err(why)) => self.flash_error(why),
        }
        for id in std::mem::take(&mut self.want_show) {
            self.fetch_show(&id, &mut effects);
        }
        // A footer message that came or went resizes the list: the selection stays in it.
        self.model.keep_selection_visible();
        self.fetch_older(&mut effects);
        let selected_now = self.model.selected().map(str::to_string);
        if selected_now != selected_before
            && let Some(id) = selected_now
        {
            self.on_selected(&id, &mut effects);
        }
        effects
    }

    /// Everything on screen, fetched again: runs, money, the selected run.
    fn refetch(&mut self, effects: &mut Vec<Effect>) {
        self.fetch_runs(effects);
        self.fetch_budget(effects);
        if let Some(id) = self.model.selected().map(str::to_string) {
            self.fetch_show(&id, effects);
        }
    }

    // ---- keys ----

    fn on_key(&mut self, key: KeyEvent, effects: &mut Vec<Effect>) {
        self.attention_unheld();
        // A prompt on top answers only what has been on screen long enough to read.
        if let Some(at) = self.views.len().checked_sub(1)
            && let Some(prompt) = self.views.get_mut::<PromptView>(at)
        {
            prompt.readable = self.shown.readable(
                &prompt.request,
                self.model.now,
                self.options.answer_guard_ms,
            );
        }
        self.sync_transcript_view();
        if let Some(top) = self.views.top_mut() {
            let action = self.keys.action(top.context(), &key);
            let outcome = top.handle_key(action, &key);
            self.apply_outcome(outcome, effects);
            return;
        }
        let action = self.keys.action(Context::Dashboard, &key);
        if let (None, KeyCode::Char(c @ '1'..='9')) = (action, key.code) {
            self.model.flash = None;
            return self.attention_choose(c as usize - '0' as usize, effects);
        }
        let Some(action) = action else {
            return;
        };
        self.model.flash = None;
        self.on_dashboard_action(action, effects);
    }

    fn apply_outcome(&mut self, outcome: Outcome, effects: &mut Vec<Effect>) {
        if outcome.close {
            self.views.pop();
        }
        match outcome.command {
            None => {}
            Some(ViewCommand::Request(tag, request)) => {
                effects.push(Effect::Request { tag, request })
            }
            Some(ViewCommand::Reread {
                run_id,
                tag,
                request,
            }) => {
                effects.push(Effect::Request { tag, request });
                let has_pr = self.model.run(&run_id).is_some_and(|entry| {
                    entry
                        .summary
                        .workspace
                        .as_ref()
                        .is_some_and(|w| w.pr.is_some())
                });
                if has_pr {
                    effects.push(Effect::Request {
                        tag: ReplyTag::Pr(run_id.clone()),
                        request: Request::Pr {
                            run_id,
                            draft: false,
                            title: None,
                            force_with_lease: false,
                            refresh: true,
                        },
                    });
                }
            }
            Some(ViewCommand::Quit) => {
                self.quitting = true;
                effects.push(Effect::Quit);
            }
            Some(ViewCommand::SetFilter(text)) => self.set_filter(text, effects),
            Some(ViewCommand::NextPrompt { after }) => self.next_prompt(after.as_deref()),
            Some(ViewCommand::Ask(confirm)) => self.views.push(confirm),
            Some(ViewCommand::Copy { text, what }) => self.copy(text, &what, effects),
            Some(ViewCommand::Flash(text)) => self.flash_info(text),
        }
    }

    fn on_dashboard_action(&mut self, action: Action, effects: &mut Vec<Effect>) {
        let selected = self.model.selected_entry().map(|e| e.summary.clone());
        let detail = self.model.focus == Pane::Detail;
        match action {
            // The focused detail pane: the keys that move in the list move in the
            // transcript, and `enter` reads it full screen.
            Action::SelectNext if detail => self.scroll_transcript(1),
            Action::SelectPrev if detail => self.scroll_transcript(-1),
            Action::SelectFirst if detail => self.model.transcript_scroll = Some(0),
            Action::SelectLast if detail => self.model.transcript_scroll = None,
            Action::Open if detail => self.open_transcript(selected.as_ref()),
            Action::FocusPane => self.focus_next_pane(),
            Action::SelectNext => self.model.move_selection(1),
            Action::SelectPrev => self.model.move_selection(-1),
            Action::SelectFirst => self.model.select_first(),
            Action::SelectLast => self.model.select_last(),
            Action::ScrollUp => self.scroll_transcript(-(PAGE_LINES as isize)),
            Action::ScrollDown => self.scroll_transcript(PAGE_LINES as isize),
            Action::FollowEnd => self.model.transcript_scroll = None,
            Action::Open => self.open_selected(effects),
            Action::NextPending => self.attention_open(),
            Action::AttentionAllow => self.attention_allow(effects),
            Action::AttentionDeny => self.attention_deny(effects),
            Action::AttentionRule => self.attention_rule(),
            Action::ClearFilter if !self.model.filter.is_empty() => {
                self.model.set_filter(String::new());
                self.flash_info("filter cleared: every run is shown".into());
            }
            Action::Redispatch => self.redispatch(selected.as_ref()),
            Action::NewDispatch => self.views.push(
                DispatchForm::new(
                    &self.options.providers,
                    &self.options.default_provider,
                    &self.options.cwd,
                    &self.options.scenarios,
                )
                .with_budget_default(self.options.default_budget_usd)
                .with_models(self.options.models.clone())
                .with_missing(self.options.missing_providers.clone())
                .with_hosts(&self.options.hosts),
            ),
            Action::FollowUp => match selected {
                Some(run) if run.head.state.is_active() => self.open_follow_up(&run, effects),
                Some(run) => self.flash_error(format!(
                    "{} has {}; dispatch a new run instead",
                    run.head.run_id, run.head.state
                )),
                None => self.flash_error("select a run first".into()),
            },
            Action::Stop => match selected {
                // A run in a turn may wrap up first: `s` offers that, or stopping now
                // (docs/ARCHITECTURE.md §"Wrap up, then stop").
                Some(run)
                    if matches!(
                        run.head.state,
                        RunState::Running | RunState::AwaitingPermission
                    ) =>
                {
                    let id = run.head.run_id.clone();
                    self.views.push(ConfirmView {
                        message: format!(
                            "{id} is working. Wrap it up (y or enter): it finishes its turn, \
                             writes its final answer, then stops. Or stop it now (s): its \
                             turn is cut and it ends with no result."
                        ),
                        what: Confirmable::StopRun { run_id: id },
                    });
                }
                _ => self.stop_or_complete(action, selected.as_ref(), effects),
            },
            Action::Complete => self.stop_or_complete(action, selected.as_ref(), effects),
            Action::Remove => match selected {
                Some(run)
                    if run.head.state.is_terminal()
                        && run.workspace.as_ref().is_some_and(|w| w.unmerged()) =>
                {
                    let ws = run
                        .workspace
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(WorkspaceView::preparing);
                    let change = ws
                        .change
                        .map(|c| format!(" ({})", c.words()))
                        .unwrap_or_default();
                    self.views.push(ConfirmView {
                        what: Confirmable::Remove {
                            run_id: run.head.run_id.clone(),
                        },
                        message: format!(
                            "{} has unmerged work in its worktree{change}. Remove it anyway? The work is committed to {}, which stays; the worktree goes.",
                            run.head.run_id,
                            ws.branch.as_deref().unwrap_or("its branch")
                        ),
                    });
                }
                Some(run) if run.head.state.is_terminal() => effects.push(Effect::Request {
                    tag: ReplyTag::Remove,
                    request: Request::Remove {
                        run_id: Some(run.head.run_id.clone()),
                        finished: false,
                        force: false,
                    },
                }),
                Some(run) => self.flash_error(format!(
                    "{} is still {}; stop it first, then remove it",
                    run.head.run_id, run.head.state
                )),
                None => self.flash_error("select a run first".into()),
            },
            Action::RemoveFinished => effects.push(Effect::Request {
                tag: ReplyTag::Remove,
                request: Request::Remove {
                    run_id: None,
                    finished: true,
                    force: false,
                },
            }),
            Action::KillAll => {
                let active = self.model.counts().active;
                if active == 0 {
                    self.flash_info("no run is active".into());
                } else {
                    self.views.push(ConfirmView {
                        what: Confirmable::KillAll,
                        message: format!(
                            "Stop all {active} active run{}? Their pending requests are denied.",
                            plural(active)
                        ),
                    });
                }
            }
            Action::Filter => {
                let previous = self.model.filter.clone();
                self.views.push(InputBox::new(
                    InputPurpose::Filter { previous },
                    self.model.filter.clone(),
                ));
            }
            Action::Help => self.views.push(HelpView::default()),
            Action::Spend => {
                self.views.push(SpendScreen::default());
                for (tag, request) in SpendScreen::requests() {
                    effects.push(Effect::Request { tag, request });
                }
            }
            Action::OpenTranscript => self.open_transcript(selected.as_ref()),
            Action::OpenDiff => match selected {
                Some(run) => self.open_diff(&run, effects),
                None => self.flash_error("select a run first".into()),
            },
            Action::OpenEditor | Action::OpenShell => match selected {
                Some(run) => {
                    let program = match action {
                        Action::OpenEditor => Program::Editor,
                        _ => Program::Shell,
                    };
                    self.open_in(&run, program, effects);
                }
                None => self.flash_error("select a run first".into()),
            },
            Action::UpdateBranch => match selected {
                Some(run) => {
                    let run_id = run.head.run_id.clone();
                    self.flash_info(format!("updating {run_id}'s branch from its base…"));
                    effects.push(Effect::Request {
                        tag: ReplyTag::WorkspaceAction {
                            run_id: run_id.clone(),
                            action: "update".into(),
                        },
                        request: Request::Update {
                            run_id,
                            rebase: false,
                        },
                    });
                }
                None => self.flash_error("select a run first".into()),
            },
            Action::TakeOver => match selected {
                Some(run) => self.open_in(&run, Program::TakeOver, effects),
                None => self.flash_error("select a run first".into()),
            },
            Action::Escalate => match selected {
                Some(run) if run.escalation_offered => {
                    let offer = self
                        .model
                        .run(&run.head.run_id)
                        .and_then(|e| e.detail.as_ref())
                        .and_then(|d| d.escalation.clone());
                    let Some(offer) = offer else {
                        self.want_show.push(run.head.run_id.clone());
                        self.flash_info(format!(
                            "loading {}'s offer; press again in a moment",
                            run.head.run_id
                        ));
                        return;
                    };
                    let request = match offer.kind {
                        EscalationKind::Escalate => Request::Escalate {
                            run_id: run.head.run_id.clone(),
                            provider: None,
                            model: None,
                        },
                        EscalationKind::Retry => Request::Retry {
                            run_id: run.head.run_id.clone(),
                        },
                    };
                    self.flash_info(format!(
                        "{} {} on {}/{}…",
                        if offer.kind == EscalationKind::Escalate {
                            "escalating"
                        } else {
                            "retrying"
                        },
                        run.head.run_id,
                        offer.to_provider,
                        offer.to_model
                    ));
                    effects.push(Effect::Request {
                        tag: ReplyTag::Escalate(run.head.run_id.clone()),
                        request,
                    });
                }
                Some(run) => self.flash_error(format!(
                    "{} has no escalation or retry offered",
                    run.head.run_id
                )),
                None => self.flash_error("select a run first".into()),
            },
            Action::PullRequest => match selected {
                // No pull request yet: a small box for its title and draft first.
                Some(run)
                    if run
                        .workspace
                        .as_ref()
                        .is_some_and(|w| w.is_worktree() && w.pr.is_none()) =>
                {
                    self.views.push(InputBox::new(
                        InputPurpose::PullRequest {
                            run_id: run.head.run_id.clone(),
                            draft: false,
                        },
                        run.head.title.clone(),
                    ));
                }
                Some(run) if run.workspace.as_ref().is_some_and(|w| w.is_worktree()) => {
                    let run_id = run.head.run_id.clone();
                    self.flash_info(match run.workspace.as_ref().and_then(|w| w.pr.as_ref()) {
                        Some(pr) => format!("pushing {run_id} to {}…", pr.words()),
                        None => format!("pushing {run_id}'s branch and opening its pull request…"),
                    });
                    effects.push(Effect::Request {
                        tag: ReplyTag::Pr(run_id.clone()),
                        request: Request::Pr {
                            run_id,
                            draft: false,
                            title: None,
                            force_with_lease: false,
                            refresh: false,
                        },
                    });
                }
                Some(run) => self.flash_error(format!(
                    "{} has no worktree or branch of its own: a pull request needs a worktree run",
                    run.head.run_id
                )),
                None => self.flash_error("select a run first".into()),
            },
            Action::Resume => match selected {
                Some(run) if resumable(&run) => {
                    self.flash_info(format!("resuming {}…", run.head.run_id));
                    effects.push(Effect::Request {
                        tag: ReplyTag::Resume(run.head.run_id.clone()),
                        request: Request::Resume {
                            run_id: run.head.run_id.clone(),
                            text: None,
                        },
                    });
                }
                Some(run) => self.flash_error(format!(
                    "{} is {}; only a run a drover restart interrupted, a hibernated run or a \
                     turn held for the model provider can be resumed",
                    run.head.run_id, run.head.state
                )),
                None => self.flash_error("select a run first".into()),
            },
            Action::Quit => {
                let active = self.model.counts().active;
                if active == 0 || self.options.owner == DashboardOwner::Background {
                    self.quitting = true;
                    effects.push(Effect::Quit);
                } else {
                    self.views.push(ConfirmView {
                        what: Confirmable::Quit,
                        message: format!(
                            "{active} run{} still active. Quit? A run in a turn is \
                             interrupted (R resumes it); the others come back as they are \
                             with the next drover",
                            plural(active)
                        ),
                    });
                }
            }
            _ => {}
        }
    }

    /// Enter on the dashboard: answer what the selected run waits for.
    fn open_selected(&mut self, effects: &mut Vec<Effect>) {
        let Some(entry) = self.model.selected_entry() else {
            return;
        };
        if let Some(pending) = entry.pending.first() {
            let mut view = PromptView::new(entry.summary.head.run_id.clone(), pending.clone());
            view.workspace = self.model.work_dir(&entry.summary.head.run_id);
            self.views.push(view);
        } else if entry.summary.head.state == RunState::AwaitingRoute {
            let id = entry.summary.head.run_id.clone();
            self.open_route(&id);
        } else if entry.summary.conflict_offered && entry.summary.head.state == RunState::Idle {
            // The offer (docs/ARCHITECTURE.md §"Workspaces"): enter sends the follow-up
            // that hands the conflict to the run.
            let id = entry.summary.head.run_id.clone();
            let text = entry
                .detail
                .as_ref()
                .and_then(|d| d.conflict_offer.as_ref())
                .and_then(|c| c.follow_up.clone());
            match text {
                Some(text) => {
                    self.flash_info(format!("sending {id} the follow-up to merge and resolve…"));
                    effects.push(Effect::Request {
                        tag: ReplyTag::FollowUp(id.clone()),
                        request: Request::FollowUp { run_id: id, text },
                    });
                }
                None => {
                    self.flash_info(format!("{id}: reading its conflict; press enter again"));
                    self.fetch_show(&id, effects);
                }
            }
        } else if entry.summary.script_approval && entry.summary.head.state.is_active() {
            let id = entry.summary.head.run_id.clone();
            match entry
                .detail
                .as_ref()
                .and_then(|d| d.script_approval.clone())
            {
                Some(approval) => self.views.push(ScriptsView::new(id, approval)),
                None => {
                    self.flash_info(format!("{id}: reading its scripts; press enter again"));
                    self.fetch_show(&id, effects);
                }
            }
        } else if entry.summary.escalation_offered
            && entry.summary.head.state != RunState::Interrupted
        {
            let key = self
                .keys
                .key_for(Context::Dashboard, Action::Escalate)
                .map_or_else(|| "the escalate key".to_string(), |k| k.to_string());
            self.flash_info(format!(
                "{} ended with an escalation offered: press {key} to take it",
                entry.summary.head.run_id
            ));
        } else if entry.summary.head.state == RunState::Interrupted {
            let key = self
                .keys
                .key_for(Context::Dashboard, Action::Resume)
                .map_or_else(|| "the resume key".to_string(), |k| k.to_string());
            self.flash_info(format!(
                "{} was interrupted by a drover restart: press {key} to resume it",
                entry.summary.head.run_id
            ));
        } else if entry.summary.head.state.is_active()
            && entry.summary.head.state != RunState::Queued
        {
            let run = entry.summary.clone();
            self.open_follow_up(&run, effects);
        } else {
            self.flash_info(format!(
                "{} waits for nothing from you",
                entry.summary.head.run_id
            ));
        }
    }

    /// `o`, `!`: the user's editor or shell in the run's directory — beside the dashboard
    /// inside tmux, else in the foreground (docs/ARCHITECTURE.md §"Into a run").
    fn open_in(&mut self, run: &RunSummary, program: Program, effects: &mut Vec<Effect>) {
        use drover_core::workspace::open;
        let id = &run.head.run_id;
        let env = &self.options.open_env;
        let lookup = |name: &str| env.get(name).cloned();
        let plan = match program {
            // `T`: `drover attach RUN` opened like a shell (docs/ARCHITECTURE.md
            // §"Take-over"); the owner says there why a run cannot be taken over.
            Program::TakeOver if run.head.state != RunState::Idle => {
                return self.flash_error(format!(
                    "{id} is {}; take a run over once it is idle",
                    run.head.state.as_str()
                ));
            }
            Program::TakeOver => open::take_over_plan(
                id,
                run.workspace.as_deref(),
                &self.options.drover_exe,
                &self.options.data_dir,
                lookup,
                self.options.open_in,
            ),
            _ => open::plan(
                id,
                run.workspace.as_deref(),
                program,
                lookup,
                self.options.open_in,
            ),
        };
        let open::Plan { dir, argv, in_tmux } = match plan {
            Ok(plan) => plan,
            Err(e) => return self.flash_error(e.message),
        };
        let beside = if in_tmux { " (a tmux window)" } else { "" };
        self.flash_info(match program {
            Program::TakeOver => format!(
                "{id} taken over in {}'s own interface{beside}; leave it to hand the run back",
                drover_core::providers::registry::cli_name(&run.head.provider)
            ),
            _ => format!("{} opened in {}{beside}", program.word(), dir.display()),
        });
        effects.push(Effect::OpenIn(OpenIn {
            run_id: id.clone(),
            program,
            argv,
            dir,
            foreground: !in_tmux,
        }));
    }

    /// `D`: the selected run's diff, when it works in a worktree that is there.
    fn open_diff(&mut self, run: &RunSummary, effects: &mut Vec<Effect>) {
        let id = &run.head.run_id;
        if let Err(e) = drover_core::workspace::diffable(id, run.workspace.as_deref()) {
            return self.flash_error(e.message);
        }
        let view = DiffScreen::new(id.clone(), run.head.title.clone());
        let (tag, request) = view.list_request();
        self.views.push(view);
        effects.push(Effect::Request { tag, request });
    }

    fn diff_view_at(&self, run_id: &str) -> Option<usize> {
        self.views.position::<DiffScreen>(|d| d.run_id == run_id)
    }

    /// The follow-up box. On a hibernated run it also wakes the run's CLI now, so that
    /// the turn starts as on a warm run once the follow-up is written.
    /// `s` on a run that is not in a turn, or `c`: stop (or complete) it now.
    fn stop_or_complete(
        &mut self,
        action: Action,
        selected: Option<&RunSummary>,
        effects: &mut Vec<Effect>,
    ) {
        match selected {
            Some(run) if run.head.state.is_active() => {
                let (tag, request, verb) = if action == Action::Stop {
                    (
                        ReplyTag::Stop(run.head.run_id.clone()),
                        Request::Stop {
                            run_id: run.head.run_id.clone(),
                        },
                        "stopping",
                    )
                } else {
                    (
                        ReplyTag::Complete(run.head.run_id.clone()),
                        Request::Complete {
                            run_id: run.head.run_id.clone(),
                        },
                        "completing",
                    )
                };
                self.flash_info(format!("{verb} {}…", run.head.run_id));
                effects.push(Effect::Request { tag, request });
            }
            Some(run) => self.flash_error(format!("{} has already ended", run.head.run_id)),
            None => self.flash_error("select a run first".into()),
        }
    }

    fn open_follow_up(&mut self, run: &RunSummary, effects: &mut Vec<Effect>) {
        if hibernated(run) {
            effects.push(Effect::Request {
                tag: ReplyTag::Wake(run.head.run_id.clone()),
                request: Request::Wake {
                    run_id: run.head.run_id.clone(),
                },
            });
        }
        let question = self
            .model
            .run(&run.head.run_id)
            .and_then(|e| e.detail.as_ref())
            .and_then(|d| d.last_result.as_ref())
            .filter(|_| run.needs_input)
            .and_then(|r| r.question.clone());
        self.views.push(InputBox::new(
            InputPurpose::FollowUp {
                run_id: run.head.run_id.clone(),
                title: run.head.title.clone(),
                question,
            },
            "",
        ));
    }

    /// Shows the oldest thing waiting for the user (a pending request or a held run's
    /// route card; other than `after`, a request id or a run id) in its view: replaces
    /// the prompt or card on top, or opens one. With nothing waiting, closes it.
    fn next_prompt(&mut self, after: Option<&str>) {
        // Everything waiting for the user, oldest first: pending requests and held runs'
        // route cards. The walk goes to the item after `after` (wrapping round), so Tab
        // visits every item in turn; an `after` that is gone starts from the oldest.
        let mut waiting: Vec<(UnixMillis, String, Option<PendingView>)> = self
            .model
            .runs()
            .filter(|e| e.summary.head.state.is_active())
            .flat_map(|e| {
                e.pending
                    .iter()
                    .map(move |p| (p.created_at, e.summary.head.run_id.clone(), Some(p.clone())))
            })
            .collect();
        waiting.extend(
            self.model
                .runs()
                .filter(|e| e.summary.head.state == RunState::AwaitingRoute)
                .map(|e| {
                    let at = e
                        .detail
                        .as_ref()
                        .and_then(|d| d.route.as_ref())
                        .map_or(e.summary.head.created_at, |r| r.created_at);
                    (at, e.summary.head.run_id.clone(), None)
                }),
        );
        let key = |item: &(UnixMillis, String, Option<PendingView>)| -> String {
            item.2
                .as_ref()
                .map_or_else(|| item.1.clone(), |p| p.request_id.clone())
        };
        waiting.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| key(a).cmp(&key(b))));
        let next = match after.and_then(|a| waiting.iter().position(|w| key(w) == a)) {
            Some(at) => waiting
                .iter()
                .cycle()
                .skip(at + 1)
                .take(waiting.len() - 1)
                .next()
                .cloned(),
            None => waiting.first().cloned(),
        };
        let on_prompt = self.views.top_as::<PromptView>().is_some()
            || self.views.top_as::<RouteView>().is_some();
        match next {
            Some((_, run_id, pending)) => {
                self.model.select(&run_id);
                if on_prompt {
                    self.views.pop();
                }
                match pending {
                    Some(p) => {
                        let mut view = PromptView::new(run_id.clone(), p);
                        view.workspace = self.model.work_dir(&run_id);
                        self.views.push(view);
                    }
                    None => self.open_route(&run_id),
                }
            }
            None => {
                if on_prompt {
                    self.views.pop();
                }
                self.flash_info("nothing else is waiting for you".into());
            }
        }
    }

    /// Opens the route card of a held run (fetching the run's view when the card is not
    /// known yet).
    fn open_route(&mut self, run_id: &str) {
        let card = self
            .model
            .run(run_id)
            .and_then(|e| e.detail.as_ref())
            .and_then(|d| d.route.clone());
        if card.is_none() {
            self.want_show.push(run_id.to_string());
        }
        self.views.push(RouteView::new(run_id, card));
    }

    /// `tab`: the run list, or the selected run's detail pane (when the terminal is wide
    /// enough to show one).
    fn focus_next_pane(&mut self) {
        self.model.focus = match self.model.focus {
            Pane::Detail => Pane::List,
            Pane::List if self.model.areas().detail.width == 0 => {
                return self.flash_error(
                    "the terminal is too narrow for the detail pane; t reads the transcript".into(),
                );
            }
            Pane::List => Pane::Detail,
        };
    }

    fn scroll_transcript(&mut self, delta: isize) {
        let Some(entry) = self.model.selected_entry() else {
            return;
        };
        let len = entry.transcript.len();
        let page = (self.model.height as usize / 3).max(1);
        let bottom = len.saturating_sub(page);
        let from = self.model.transcript_scroll.unwrap_or(bottom) as isize;
        let to = (from + delta).max(0) as usize;
        self.model.transcript_scroll = if to >= bottom { None } else { Some(to) };
    }

    fn on_mouse(&mut self, mouse: MouseEvent) {
        // Over a view, the wheel is the top view's; nothing else reaches the dashboard.
        self.sync_transcript_view();
        if let Some(top) = self.views.top_mut() {
            match mouse.kind {
                MouseEventKind::ScrollDown => top.wheel(true),
                MouseEventKind::ScrollUp => top.wheel(false),
                _ => {}
            }
            return;
        }
        let areas = self.model.areas();
        let at = ratatui::layout::Position::new(mouse.column, mouse.row);
        let in_trays = areas.trays_inner.contains(at);
        let in_detail = areas.detail.contains(at);
        match mouse.kind {
            MouseEventKind::Down(MouseButton::Left) if in_trays => {
                self.model.focus = Pane::List;
                let line = (mouse.row - areas.trays_inner.y) as usize;
                if let Some(id) = self.model.run_at_line(line).map(str::to_string) {
                    self.model.select(&id);
                }
            }
            // A click on the selected run's detail reads its transcript full screen.
            MouseEventKind::Down(MouseButton::Left) if in_detail => {
                let selected = self.model.selected_entry().map(|e| e.summary.clone());
                self.open_transcript(selected.as_ref());
            }
            MouseEventKind::ScrollDown if in_trays => self.model.move_selection(1),
            MouseEventKind::ScrollUp if in_trays => self.model.move_selection(-1),
            MouseEventKind::ScrollDown if in_detail => self.scroll_transcript(WHEEL_LINES as isize),
            MouseEventKind::ScrollUp if in_detail => {
                self.scroll_transcript(-(WHEEL_LINES as isize))
            }
            _ => {}
        }
    }

    // ---- dispatcher events and answers ----

    fn on_dispatch_event(&mut self, event: &DispatchEvent, effects: &mut Vec<Effect>) {
        let applied = self.model.apply(event);
        if let Some(text) = applied.started_needing
            && self.options.notify
        {
            effects.push(Effect::Notify(text));
        }
        let run_id = event.run_id().to_string();
        let selected = self.model.selected() == Some(run_id.as_str());
        match event {
            DispatchEvent::RunChanged { .. } if applied.stale => {}
            DispatchEvent::RunChanged { run } => {
                self.fetch_budget(effects);
                if selected || applied.pending_unknown {
                    self.fetch_show(&run_id, effects);
                }
                if run.head.state.is_terminal() {
                    self.prompts_gone(&run_id, None, "the run has ended");
                }
                if run.head.state != RunState::AwaitingRoute {
                    self.route_gone(&run_id, &format!("the run is now {}", run.head.state));
                }
                // A diff on screen whose run changed again is read again.
                if let Some(view) = self.views.find::<DiffScreen>(|d| d.run_id == run_id)
                    && view.state == DiffState::Ready
                    && run.workspace.as_ref().is_some_and(|w| {
                        w.has_worktree() && w.change.is_some() && w.change != view.change
                    })
                {
                    let (tag, request) = view.list_request();
                    effects.push(Effect::Request { tag, request });
                }
            }
            DispatchEvent::PermissionResolved {
                request_id, how, ..
            } => {
                self.prompts_gone(
                    &run_id,
                    Some(request_id),
                    &format!("it was resolved elsewhere ({how})"),
                );
            }
            DispatchEvent::RunRemoved { .. } => {
                self.prompts_gone(&run_id, None, "the run was removed");
            }
            // A budget note (the warning, the cap): the header reads the session again,
            // so its gauge says what the note says.
            DispatchEvent::Budget { .. } => self.fetch_budget(effects),
            _ => {}
        }
    }

    /// Marks prompts of `run_id` (of one request, or all) that are still waiting for the
    /// user as gone: nothing will be sent for them.
    fn prompts_gone(&mut self, run_id: &str, request_id: Option<&str>, why: &str) {
        for p in self.views.each_mut::<PromptView>() {
            if p.run_id == run_id
                && request_id.is_none_or(|id| p.request.request_id == id)
                && matches!(p.state, PromptState::Open | PromptState::Failed(_))
            {
                p.state = PromptState::Gone(format!(
                    "This request is no longer pending: {why}. Nothing was sent."
                ));
            }
        }
    }

    /// Marks route cards of `run_id` still open for a pick as gone.
    fn route_gone(&mut self, run_id: &str, why: &str) {
        for r in self.views.each_mut::<RouteView>() {
            if r.run_id == run_id && matches!(r.state, RouteState::Open | RouteState::Refused(_)) {
                r.state = RouteState::Gone(format!(
                    "This card is no longer open: {why}. Nothing was sent."
                ));
            }
        }
    }

    fn route_view_at(&self, run_id: &str) -> Option<usize> {
        self.views.position::<RouteView>(|r| r.run_id == run_id)
    }

    fn on_routed(&mut self, run_id: &str, declined: bool, result: Result<Response, DroverError>) {
        let at = self.route_view_at(run_id);
        match result.and_then(Response::into_run) {
            Ok(run) => {
                if let Some(at) = at {
                    let on_top = self.views.is_top(at);
                    self.views.remove(at);
                    if on_top && !declined {
                        // Like answering a prompt: the next thing waiting, if any.
                        if self.model.oldest_pending(None).is_some()
                            || self.model.runs().any(|e| {
                                e.summary.head.state == RunState::AwaitingRoute
                                    && e.summary.head.run_id != run_id
                            })
                        {
                            self.next_prompt(Some(run_id));
                        }
                    }
                }
                self.model.upsert(run);
                self.want_show.push(run_id.to_string());
                self.flash_info(if declined {
                    format!("declined {run_id}'s route card; the run is stopped")
                } else {
                    format!("routed {run_id}")
                });
            }
            Err(e) => {
                self.want_show.push(run_id.to_string());
                let gone = matches!(
                    e.code,
                    ErrorCode::RouteNotFound | ErrorCode::RunNotActive | ErrorCode::RunNotFound
                );
                match at.and_then(|at| self.views.get_mut::<RouteView>(at)) {
                    Some(r) => {
                        r.state = if gone {
                            RouteState::Gone(format!(
                                "This card is no longer open ({}): {}. Nothing was applied.",
                                e.code, e.message
                            ))
                        } else {
                            RouteState::Refused(if e.code == ErrorCode::RoutePickRefused {
                                e.message
                            } else {
                                format!("{}: {}", e.code, e.message)
                            })
                        };
                    }
                    _ => self.flash_error(format!("{}: {}", e.code, e.message)),
                }
            }
        }
    }

    fn on_reply(
        &mut self,
        tag: ReplyTag,
        result: Result<Response, DroverError>,
        effects: &mut Vec<Effect>,
    ) {
        match tag {
            ReplyTag::Runs => {
                self.runs_in_flight = false;
                self.listed_once = true;
                match result.and_then(Response::into_runs) {
                    Ok(runs) => {
                        self.model.replace_window(runs, Some(FINISHED_PAGE));
                        let unknown: Vec<String> = self
                            .model
                            .runs()
                            .filter(|e| {
                                e.summary.head.state.is_active()
                                    && e.summary.pending != e.pending.len()
                            })
                            .map(|e| e.summary.head.run_id.clone())
                            .collect();
                        for id in unknown {
                            self.fetch_show(&id, effects);
                        }
                    }
                    Err(e) => self.flash_error(format!("cannot list runs: {}", e.message)),
                }
            }
            ReplyTag::OlderRuns => {
                self.older_in_flight = false;
                match result.and_then(Response::into_runs) {
                    Ok(runs) => self.model.add_runs(runs, Some(FINISHED_PAGE)),
                    Err(e) => self.flash_error(format!("cannot load older runs: {}", e.message)),
                }
            }
            ReplyTag::FoundRuns(needle) => match result.and_then(Response::into_runs) {
                // An answer for a filter since changed is of no use.
                Ok(runs) if self.model.filter.trim() == needle => self.model.add_runs(runs, None),
                Ok(_) => {}
                Err(e) => self.flash_error(format!("cannot search the runs: {}", e.message)),
            },
            ReplyTag::Spend(by) => {
                let read = match result.and_then(Response::into_spend) {
                    Ok(view) => spend::Read::Got(view),
                    Err(e) => spend::Read::Failed(format!("cannot read the spend: {}", e.message)),
                };
                if let Some(at) = self.views.position::<SpendScreen>(|_| true)
                    && let Some(view) = self.views.get_mut::<SpendScreen>(at)
                {
                    view.answer(by, read);
                }
            }
            ReplyTag::FoundLines(needle) => match result.and_then(Response::into_search) {
                Ok(view) if self.model.filter.trim() == needle => {
                    self.model.add_runs(view.runs, None);
                    self.model.set_found(view.hits);
                }
                Ok(_) => {}
                Err(e) => self.flash_error(format!("cannot search the ledger: {}", e.message)),
            },
            ReplyTag::Budget => {
                self.budget_in_flight = false;
                if let Ok(budget) = result.and_then(Response::into_budget) {
                    // A dashboard that attaches after a reload was refused learns of it
                    // here (the Health event went out before it listened).
                    self.model.config_refused = budget.config_refused.clone();
                    self.model.ledger_unavailable = budget.ledger_unavailable.clone();
                    self.model.budget = Some(budget);
                }
                if std::mem::take(&mut self.budget_again) {
                    self.fetch_budget(effects);
                }
            }
            ReplyTag::Show(id) => {
                self.show_in_flight.remove(&id);
                if let Ok(view) = result.and_then(Response::into_show) {
                    for r in self.views.each_mut::<RouteView>() {
                        if r.run_id == view.head.run_id {
                            r.set_card(view.route.clone());
                        }
                    }
                    self.model.set_detail(view);
                }
                if self.show_again.remove(&id) {
                    self.fetch_show(&id, effects);
                }
            }
            ReplyTag::Transcript(id) => {
                if let Ok(view) = result.and_then(Response::into_transcript) {
                    self.model.set_transcript(&id, view.lines, view.last_seq);
                }
            }
            ReplyTag::Dispatch => self.on_dispatched(result),
            ReplyTag::Respond { run_id, request_id } => {
                self.on_responded(&run_id, &request_id, result)
            }
            ReplyTag::FollowUp(run_id) => {
                let at = self.views.position::<InputBox>(|i| {
                    matches!(&i.purpose, InputPurpose::FollowUp { run_id: id, .. } if *id == run_id)
                });
                match result {
                    Ok(_) => {
                        if let Some(at) = at {
                            self.views.remove(at);
                        }
                        self.flash_info(format!("follow-up sent to {run_id}"));
                    }
                    Err(e) => match at.and_then(|at| self.views.get_mut::<InputBox>(at)) {
                        Some(input) => {
                            input.sending = false;
                            input.error = Some(format!("{}: {}", e.code, e.message));
                        }
                        _ => self.flash_error(format!("{}: {}", e.code, e.message)),
                    },
                }
            }
            ReplyTag::ApproveScripts { run_id, approve } => {
                match result.and_then(Response::into_run) {
                    Ok(run) => {
                        self.model.upsert(run);
                        self.want_show.push(run_id.clone());
                        self.flash_info(if approve {
                            format!("{run_id}: scripts approved; its setup runs, then it starts")
                        } else {
                            format!("{run_id}: scripts refused; it starts without them")
                        });
                    }
                    Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
                }
            }
            ReplyTag::Pr(id) => match result.and_then(Response::into_pr) {
                Ok(view) => {
                    self.want_show.push(id.clone());
                    let text = match (&view.pr, &view.push) {
                        (Some(pr), _) => format!("{id}: {} {}", pr.words(), pr.url),
                        (None, Some(push)) => match &push.compare_url {
                            Some(url) => {
                                format!("pushed {}; open a pull request at {url}", push.branch)
                            }
                            None => format!(
                                "pushed {}; the remote gave no address for a pull request{}",
                                push.branch,
                                view.forge_cli_missing
                                    .as_deref()
                                    .map(|c| format!(" (`{c}` is not on PATH)"))
                                    .unwrap_or_default()
                            ),
                        },
                        (None, None) => format!("{id} has no pull request"),
                    };
                    self.flash_info(text);
                }
                // The remote's branch moved on: replacing it is the user's call.
                Err(e)
                    if e.code == drover_core::ErrorCode::PushRefused
                        && e.message.contains("--force-with-lease") =>
                {
                    self.views.push(ConfirmView {
                        what: Confirmable::ForcePush { run_id: id.clone() },
                        message: format!(
                            "The remote's branch of {id} has commits its branch lacks. Push \
                             with --force-with-lease? It replaces them, unless someone pushed \
                             since drover last fetched."
                        ),
                    });
                }
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            ReplyTag::Stop(id) | ReplyTag::Complete(id) => match result {
                Ok(_) => self.flash_info(format!("{id} is ending")),
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            ReplyTag::WrapUp(id) => match result {
                Ok(_) => self.flash_info(format!(
                    "{id} is wrapping up: it writes its final answer, then stops"
                )),
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            ReplyTag::Remove => match result.and_then(Response::into_removed) {
                Ok(removed) => {
                    let n = removed.removed.len();
                    self.flash_info(format!("removed {n} finished run{}", plural(n)));
                    if !removed.unmerged.is_empty() {
                        // `X` removed what held nothing; what holds work is listed, then
                        // asked about.
                        let held: Vec<String> = removed
                            .unmerged
                            .iter()
                            .map(|id| {
                                let branch = self
                                    .model
                                    .run(id)
                                    .and_then(|e| e.summary.workspace.as_ref())
                                    .and_then(|w| w.branch.clone())
                                    .unwrap_or_else(|| "its branch".into());
                                format!("{id} ({branch})")
                            })
                            .collect();
                        let m = held.len();
                        self.views.push(ConfirmView {
                            what: Confirmable::RemoveUnmerged,
                            message: format!(
                                "Removed {n} finished run{} with nothing to keep. {m} hold{} unmerged work: {}. Remove {} too? Their work is committed onto their branches, which stay.",
                                plural(n),
                                if m == 1 { "s" } else { "" },
                                held.join(", "),
                                if m == 1 { "it" } else { "them" }
                            ),
                        });
                    }
                }
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            ReplyTag::Route(run_id) => self.on_routed(&run_id, false, result),
            ReplyTag::RouteDecline(run_id) => self.on_routed(&run_id, true, result),
            ReplyTag::Escalate(run_id) => match result.and_then(Response::into_run) {
                Ok(run) => {
                    let id = run.head.run_id.clone();
                    self.model.upsert(run);
                    self.model.select(&id);
                    self.want_show.push(run_id.clone());
                    self.flash_info(format!("{run_id} went on as {id}"));
                }
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            // Waking ahead is a head start only: the follow-up wakes the run anyway.
            ReplyTag::Wake(_) => {
                if let Ok(run) = result.and_then(Response::into_run) {
                    self.model.upsert(run);
                }
            }
            ReplyTag::Resume(run_id) => match result.and_then(Response::into_run) {
                Ok(run) => {
                    self.model.upsert(run);
                    self.want_show.push(run_id.clone());
                    self.flash_info(format!("resumed {run_id}"));
                }
                // Its turn was not cut short: it waits for the user's words, which go in
                // the follow-up box (drover sends none of its own).
                Err(e) if e.code == drover_core::ErrorCode::FollowUpNeeded => {
                    match self.model.run(&run_id).map(|e| e.summary.clone()) {
                        Some(run) => {
                            self.flash_info(format!(
                                "{run_id} waits for your words: drover sends none of its own"
                            ));
                            self.open_follow_up(&run, effects);
                        }
                        None => self.flash_error(format!("{}: {}", e.code, e.message)),
                    }
                }
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
            ReplyTag::Diff { run_id, file } => self.on_diff(&run_id, file, result, effects),
            ReplyTag::WorkspaceAction { run_id, action } => {
                self.on_workspace_action(&run_id, &action, result, effects)
            }
            ReplyTag::KillAll => match result.and_then(Response::into_stopped) {
                Ok(stopped) => {
                    let n = stopped.stopped.len();
                    self.flash_info(format!("stopping {n} run{}", plural(n)));
                }
                Err(e) => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
        }
    }

    fn on_diff(
        &mut self,
        run_id: &str,
        file: Option<String>,
        result: Result<Response, DroverError>,
        effects: &mut Vec<Effect>,
    ) {
        let Some(view) = self
            .diff_view_at(run_id)
            .and_then(|at| self.views.get_mut::<DiffScreen>(at))
        else {
            return;
        };
        match (result.and_then(Response::into_diff), file) {
            (Ok(diff), None) => {
                if let Some((tag, request)) = view.set_files(diff) {
                    effects.push(Effect::Request { tag, request });
                }
            }
            (Ok(diff), Some(_)) => view.set_patch(diff),
            (Err(e), _) => view.failed(format!("{}: {}", e.code, e.message)),
        }
    }

    fn on_workspace_action(
        &mut self,
        run_id: &str,
        action: &str,
        result: Result<Response, DroverError>,
        effects: &mut Vec<Effect>,
    ) {
        let at = self.diff_view_at(run_id);
        match result.and_then(Response::into_workspace) {
            Ok(done) if done.update.is_some() => self.on_updated(run_id, &done),
            Ok(done) => {
                let words = match &done.merge {
                    Some(m) => format!(
                        "merged {run_id} into {} ({}){}",
                        m.into,
                        m.how.words(),
                        if m.checkout_updated || m.how == drover_core::workspace::MergeHow::UpToDate
                        {
                            String::new()
                        } else {
                            format!(
                                "; your checkout is not on {}, only the branch moved",
                                m.into
                            )
                        }
                    ),
                    None if action == "keep" => format!(
                        "kept {}; {run_id}'s worktree is removed",
                        done.workspace.branch.as_deref().unwrap_or("its branch")
                    ),
                    None => format!("discarded {run_id}'s worktree and branch"),
                };
                self.want_show.push(run_id.to_string());
                if let Some(at) = at {
                    if done.workspace.has_worktree() {
                        // An idle run merged: it goes on, its diff is empty now.
                        if let Some(view) = self.views.get_mut::<DiffScreen>(at) {
                            view.acted(&done);
                            let (tag, request) = view.list_request();
                            effects.push(Effect::Request { tag, request });
                        }
                    } else {
                        self.views.remove(at);
                    }
                }
                self.flash_info(words);
            }
            Err(e) => match at.and_then(|at| self.views.get_mut::<DiffScreen>(at)) {
                Some(view) => view.failed(format!("{}: {}", e.code, e.message)),
                _ => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
        }
    }

    /// `u` came back: said on the flash line; a conflict opens the follow-up that hands it
    /// to the run, filled in (`enter` sends it, `esc` drops it: drover never sends it
    /// unasked).
    fn on_updated(&mut self, run_id: &str, done: &drover_core::workspace::WorkspaceActionView) {
        use drover_core::workspace::UpdateHow;
        let Some(u) = &done.update else {
            return;
        };
        self.want_show.push(run_id.to_string());
        let n = u.files.len();
        let words = match u.how {
            UpdateHow::UpToDate => {
                format!("{run_id}'s branch already has everything of {}", u.base)
            }
            UpdateHow::Merged | UpdateHow::Rebased => format!(
                "{} merged into {run_id}'s branch: {n} file{} changed",
                u.base,
                plural(n)
            ),
            UpdateHow::Conflict => {
                let mut words = format!(
                    "{} conflicts with {run_id}'s branch in {}; nothing changed",
                    u.base,
                    u.files.join(", ")
                );
                let run = self.model.run(run_id).map(|e| e.summary.clone());
                if let (Some(run), Some(text)) = (run, &u.follow_up)
                    && run.head.state.is_active()
                {
                    self.views.push(InputBox::new(
                        InputPurpose::FollowUp {
                            run_id: run_id.to_string(),
                            title: run.head.title.clone(),
                            question: None,
                        },
                        text,
                    ));
                    words.push_str(" — enter sends the run this follow-up");
                }
                return self.flash_error(words);
            }
        };
        self.flash_info(words);
    }

    fn on_dispatched(&mut self, result: Result<Response, DroverError>) {
        let form_at = self.views.position::<DispatchForm>(|_| true);
        match result.and_then(Response::into_run) {
            Ok(run) => {
                if let Some(at) = form_at {
                    self.views.remove(at);
                }
                let id = run.head.run_id.clone();
                self.model.upsert(run);
                self.model.select(&id);
                self.flash_info(format!("dispatched {id}"));
            }
            Err(e) => match form_at.and_then(|at| self.views.get_mut::<DispatchForm>(at)) {
                Some(form) => form.refused(&e),
                _ => self.flash_error(format!("{}: {}", e.code, e.message)),
            },
        }
    }

    fn on_responded(
        &mut self,
        run_id: &str,
        request_id: &str,
        result: Result<Response, DroverError>,
    ) {
        self.attention_settled(request_id);
        let prompt_at = self
            .views
            .position::<PromptView>(|p| p.request.request_id == request_id && p.run_id == run_id);
        match result {
            Ok(answer) => {
                if let Response::Rule(rule) = &answer {
                    self.flash_info(format!(
                        "rule {} saved: {} `{}` · {}",
                        rule.id,
                        rule.decision.as_str(),
                        rule.pattern,
                        rule.scope_words()
                    ));
                }
                self.model.forget_pending(run_id, request_id);
                if let Some(at) = prompt_at {
                    if self.views.is_top(at) {
                        // Answering moves to the next request.
                        self.next_prompt(Some(request_id));
                    } else {
                        self.views.remove(at);
                    }
                }
            }
            Err(e) => {
                let gone = matches!(
                    e.code,
                    ErrorCode::PermissionAlreadyResolved
                        | ErrorCode::NoPendingRequest
                        | ErrorCode::RunNotActive
                        | ErrorCode::RunNotFound
                );
                if gone {
                    self.model.forget_pending(run_id, request_id);
                }
                match prompt_at.and_then(|at| self.views.get_mut::<PromptView>(at)) {
                    Some(p) => {
                        p.state = if gone {
                            PromptState::Gone(format!(
                                "This request is no longer pending ({}): it was answered \
                                 elsewhere, withdrawn or timed out. Your answer was not applied.",
                                e.code
                            ))
                        } else {
                            PromptState::Failed(format!("{}: {}", e.code, e.message))
                        };
                    }
                    _ => self.flash_error(format!("{}: {}", e.code, e.message)),
                }
            }
        }
    }

    // ---- fetches ----

    fn on_selected(&mut self, run_id: &str, effects: &mut Vec<Effect>) {
        self.fetch_show(run_id, effects);
        if self.model.run(run_id).is_some_and(|e| !e.transcript_loaded) {
            self.model.transcript_requested(run_id);
            effects.push(Effect::Request {
                tag: ReplyTag::Transcript(run_id.to_string()),
                request: Request::Transcript {
                    run_id: run_id.to_string(),
                    format: TranscriptFormat::Tail,
                },
            });
        }
    }

    fn fetch_show(&mut self, run_id: &str, effects: &mut Vec<Effect>) {
        if self.show_in_flight.contains(run_id) {
            self.show_again.insert(run_id.to_string());
            return;
        }
        self.show_in_flight.insert(run_id.to_string());
        effects.push(Effect::Request {
            tag: ReplyTag::Show(run_id.to_string()),
            request: Request::Show {
                run_id: run_id.to_string(),
            },
        });
    }

    fn fetch_budget(&mut self, effects: &mut Vec<Effect>) {
        if self.budget_in_flight {
            self.budget_again = true;
            return;
        }
        self.budget_in_flight = true;
        effects.push(Effect::Request {
            tag: ReplyTag::Budget,
            request: Request::Budget,
        });
    }

    fn fetch_runs(&mut self, effects: &mut Vec<Effect>) {
        if self.runs_in_flight {
            return;
        }
        self.runs_in_flight = true;
        effects.push(Effect::Request {
            tag: ReplyTag::Runs,
            request: Request::Runs {
                state: None,
                include_removed: false,
                workflow: None,
                limit: Some(FINISHED_PAGE),
                before: None,
                search: None,
            },
        });
    }

    /// The next page of finished runs, when the selection nears the end of those held.
    fn fetch_older(&mut self, effects: &mut Vec<Effect>) {
        if self.older_in_flight || !self.model.wants_older() {
            return;
        }
        let Some(before) = self.model.oldest_finished().map(str::to_string) else {
            return;
        };
        self.older_in_flight = true;
        effects.push(Effect::Request {
            tag: ReplyTag::OlderRuns,
            request: Request::Runs {
                state: None,
                include_removed: false,
                workflow: None,
                limit: Some(FINISHED_PAGE),
                before: Some(before),
                search: None,
            },
        });
    }

    /// Sets the filter, and searches the whole ledger for it: runs it matches that are
    /// not held come in with the answer.
    fn set_filter(&mut self, text: String, effects: &mut Vec<Effect>) {
        self.model.set_filter(text.clone());
        let needle = text.trim();
        if needle.is_empty() {
            return;
        }
        effects.push(Effect::Request {
            tag: ReplyTag::FoundRuns(needle.to_string()),
            request: Request::Runs {
                state: None,
                include_removed: false,
                workflow: None,
                limit: Some(FINISHED_PAGE),
                before: None,
                search: Some(needle.to_string()),
            },
        });
        effects.push(Effect::Request {
            tag: ReplyTag::FoundLines(needle.to_string()),
            request: Request::Search {
                query: phrases(needle),
                limit: Some(FOUND_LINES),
            },
        });
    }

    fn flash_info(&mut self, text: String) {
        self.model.flash = Some(Flash { text, error: false });
    }

    fn flash_error(&mut self, text: String) {
        self.model.flash = Some(Flash { text, error: true });
    }
}

/// Lines the filter asks the search index for (the runs they name come with them).
const FOUND_LINES: u32 = 100;

/// The filter's text as a search query: each word a phrase of its own (all of them must
/// match), so what a person types (`staging-eu`, `src/cache.rs`, `a:b`) is never read as
/// the query syntax.
pub(crate) fn phrases(text: &str) -> String {
    text.split_whitespace()
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `R` may resume the run: a drover restart interrupted it, it is hibernated (it
/// wakes in its provider session), or its turn is held for the model provider (it is
/// sent again now). The owner sends its own turn only for a turn a restart cut short;
/// for any other run it answers `FOLLOW_UP_NEEDED`, and the follow-up box opens.
fn resumable(run: &RunSummary) -> bool {
    use drover_core::live_state::LiveStateKind;
    run.head.state == RunState::Interrupted
        || hibernated(run)
        || run
            .head
            .live_state
            .as_ref()
            .is_some_and(|l| l.state == LiveStateKind::WaitingProvider)
}

/// Whether the run is hibernated (or hibernating): its live line says so.
fn hibernated(run: &RunSummary) -> bool {
    run.head
        .live_state
        .as_ref()
        .and_then(|l| l.detail.as_deref())
        .is_some_and(|d| {
            d.starts_with(drover_core::dispatch::core::HIBERNATED_DETAIL)
                || d.starts_with(drover_core::dispatch::core::HIBERNATING_DETAIL)
        })
}
