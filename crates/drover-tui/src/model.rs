//! The view model: a plain snapshot of what the dashboard knows, fed by dispatcher events
//! and answers, read by `render` without any I/O.
//!
//! What must stay true:
//! - everything here comes from the dispatcher API (summaries, views, events); nothing is
//!   invented, and nothing here awaits or touches the ledger;
//! - the tray rows ([`ViewModel::rows`]) are rebuilt whenever a run or the filter
//!   changes, never while drawing;
//! - the selection is a run id, so it stays on the same run while rows move between
//!   trays; it is `None` only when no row is visible;
//! - what is held does not grow with the ledger's history: every active run, and the
//!   finished runs of the first window ([`FINISHED_PAGE`]), of the pages loaded on scroll
//!   and of ledger searches, at most [`FINISHED_MAX`] of them (the oldest go first).

use std::collections::{HashMap, VecDeque};

use drover_core::UnixMillis;
use drover_core::dispatch::DispatchEvent;
use drover_core::dispatch::api::{BudgetView, PendingView, RunSummary, RunView, SearchHit};
use drover_core::providers::RequestKind;
use drover_core::run_state::RunState;

/// Finished runs asked for at once: the first window, each page loaded on scroll and each
/// search of the ledger.
pub const FINISHED_PAGE: u32 = 200;
/// Finished runs held at most; beyond it the oldest are let go (the ledger keeps them).
pub const FINISHED_MAX: usize = 2_000;
/// How close to the end of the Finished tray the selection comes before the next page is
/// asked for.
const PAGE_AHEAD: usize = 10;

/// Transcript lines kept per run (the dispatcher's ring holds as many).
pub const TRANSCRIPT_MAX_LINES: usize = 2_000;
/// Notes kept per run in the detail pane.
const NOTES_MAX: usize = 50;

/// A group of runs in the left pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tray {
    NeedsYou,
    Running,
    Idle,
    Queued,
    Finished,
}

impl Tray {
    pub const ALL: [Tray; 5] = [
        Tray::NeedsYou,
        Tray::Running,
        Tray::Idle,
        Tray::Queued,
        Tray::Finished,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tray::NeedsYou => "Needs you",
            Tray::Running => "Running",
            Tray::Idle => "Idle",
            Tray::Queued => "Queued",
            Tray::Finished => "Finished",
        }
    }

    /// The tray a run belongs to.
    pub fn of(run: &RunSummary) -> Tray {
        if needs_you(run).is_some() {
            Tray::NeedsYou
        } else if run.head.state.is_terminal() {
            Tray::Finished
        } else {
            match run.head.state {
                RunState::Queued => Tray::Queued,
                RunState::Idle => Tray::Idle,
                _ => Tray::Running,
            }
        }
    }
}

pub use drover_core::dispatch::api::Need;

/// What a run waits for from the user, if anything (see [`RunSummary::needs_you`]).
pub fn needs_you(run: &RunSummary) -> Option<Need> {
    run.needs_you()
}

/// One line of the left pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// A tray's heading, with how many (filtered) runs it holds.
    Header(Tray, usize),
    Run(String),
}

impl Row {
    /// Lines the row takes on screen.
    pub fn height(&self) -> usize {
        match self {
            Row::Header(..) => 1,
            Row::Run(_) => 2,
        }
    }
}

/// How many settled request ids a run remembers (more than can be in flight at once).
const SETTLED_KEPT: usize = 64;

/// Everything known about one run.
#[derive(Debug, Clone)]
pub struct RunEntry {
    pub summary: RunSummary,
    /// The full view, once fetched (kept fresh for the selected run).
    pub detail: Option<RunView>,
    /// Pending requests, oldest first.
    pub pending: Vec<PendingView>,
    /// Requests known to be settled, newest last (at most [`SETTLED_KEPT`]): a view fetched
    /// before a request was answered may still list it, and must not bring it back.
    settled: VecDeque<String>,
    pub transcript: VecDeque<String>,
    /// Whether the transcript was fetched (otherwise it holds only lines heard since).
    pub transcript_loaded: bool,
    /// Lines heard since the transcript was asked for, with their seqs, while the answer
    /// is on its way (they may or may not be in it; [`ViewModel::set_transcript`] merges
    /// them).
    heard_since_fetch: Option<Vec<(u64, String)>>,
    /// The newest seq the fetched transcript holds, until a newer line is heard: a line
    /// published before the answer was read may reach the dashboard after the answer did
    /// (the answer and the events travel apart), and is then already shown.
    transcript_seq: Option<u64>,
}

impl RunEntry {
    fn new(summary: RunSummary) -> Self {
        RunEntry {
            summary,
            detail: None,
            pending: Vec::new(),
            settled: VecDeque::new(),
            transcript: VecDeque::new(),
            transcript_loaded: false,
            heard_since_fetch: None,
            transcript_seq: None,
        }
    }
}

/// Lines a long footer message may wrap to above the hints.
pub const FLASH_LINES: usize = 3;

/// Columns a footer message may take beside the hints on their line.
pub fn flash_room(width: usize) -> usize {
    width.saturating_sub(4).max(10) * 2 / 3
}

/// A message in the footer: what an action did, or why it was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Flash {
    pub text: String,
    pub error: bool,
}

/// What changed for the user when an event was applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// The run now needs the user and did not before (text for a notification).
    pub started_needing: Option<String>,
    /// The run's summary changed (state, money, flags): its detail may be stale.
    pub summary_changed: bool,
    /// The run's pending count differs from the requests known here.
    pub pending_unknown: bool,
    /// The summary is older than the one already known (a reply's snapshot can overtake
    /// the events before it): it was not applied.
    pub stale: bool,
}

/// Where a view of a run stands in its history: its `rev`, then its live state's seq
/// (both only grow), so of two views of one run the lower is the older.
fn version(s: &RunSummary) -> (u64, u64) {
    (s.head.rev, s.head.live_state.as_ref().map_or(0, |l| l.seq))
}

/// The dashboard's pane the keys act on: `tab` moves the focus between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pane {
    /// The run list: `enter` answers the selected run, `j`/`k` select.
    #[default]
    List,
    /// The selected run's detail and transcript: `enter` reads the transcript full
    /// screen, `j`/`k` scroll it.
    Detail,
}

/// The dashboard's snapshot.
#[derive(Debug, Clone, Default)]
pub struct ViewModel {
    /// The clock used for ages and countdowns, set before each frame.
    pub now: UnixMillis,
    /// The terminal size.
    pub width: u16,
    pub height: u16,
    pub budget: Option<BudgetView>,
    runs: HashMap<String, RunEntry>,
    rows: Vec<Row>,
    /// How far each sub-run's row is indented under its parent (absent: not at all).
    indents: HashMap<String, usize>,
    selected: Option<String>,
    /// Rows above the visible part of the left pane.
    pub list_top: usize,
    pub filter: String,
    /// What the ledger's search index found for the filter: each run's newest matching
    /// line (a run shown for it shows the line as its second line).
    found: HashMap<String, SearchHit>,
    /// `None` follows the end of the transcript; `Some(n)` shows it from line `n`.
    pub transcript_scroll: Option<usize>,
    /// The pane the keys act on (drawn with a heavy border when it is the detail).
    pub focus: Pane,
    pub flash: Option<Flash>,
    /// A config reload the owner refused (shown on the footer until a good one).
    pub config_refused: Option<String>,
    /// Why the owner's ledger cannot write (it refuses new work until it can): the
    /// header's second line says so while it lasts.
    pub ledger_unavailable: Option<String>,
    /// Since when the owner has not answered (the dashboard reconnects by itself).
    pub owner_gone_since: Option<UnixMillis>,
    /// Whether the ledger may hold finished runs older than the oldest one held.
    finished_more: bool,
}

impl ViewModel {
    pub fn new(now: UnixMillis, width: u16, height: u16) -> Self {
        ViewModel {
            now,
            width,
            height,
            ..ViewModel::default()
        }
    }

    pub fn run(&self, run_id: &str) -> Option<&RunEntry> {
        self.runs.get(run_id)
    }

    pub fn run_mut(&mut self, run_id: &str) -> Option<&mut RunEntry> {
        self.runs.get_mut(run_id)
    }

    pub fn runs(&self) -> impl Iterator<Item = &RunEntry> {
        self.runs.values()
    }

    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// How far the run's row is indented under its parent in its tray (0: a top row).
    pub fn indent(&self, run_id: &str) -> usize {
        self.indents.get(run_id).copied().unwrap_or(0)
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    pub fn selected(&self) -> Option<&str> {
        self.selected.as_deref()
    }

    pub fn selected_entry(&self) -> Option<&RunEntry> {
        self.selected.as_deref().and_then(|id| self.runs.get(id))
    }

    /// Replaces every summary with a complete list (every run there is).
    pub fn replace_runs(&mut self, summaries: Vec<RunSummary>) {
        self.replace_window(summaries, None);
    }

    /// Replaces the summaries with a fresh first window (the answer to `Request::Runs`
    /// with `limit`): every active run, and the finished runs down to the oldest in the
    /// answer. Finished runs held from older pages or searches stay; details, pending
    /// requests and transcripts of runs still listed are kept.
    pub fn replace_window(&mut self, summaries: Vec<RunSummary>, limit: Option<u32>) {
        let finished: Vec<(UnixMillis, &str)> = summaries
            .iter()
            .filter(|s| s.head.state.is_terminal())
            .map(finish_key)
            .collect();
        let complete = limit.is_none_or(|l| finished.len() < l as usize);
        // Held finished runs older than the window's edge came from pages or searches.
        let edge = finished.iter().min().map(|(at, id)| (*at, id.to_string()));
        let mut older: Vec<RunEntry> = Vec::new();
        if !complete && let Some((at, id)) = &edge {
            let keys: Vec<String> = self
                .runs
                .values()
                .filter(|e| e.summary.head.state.is_terminal())
                .filter(|e| {
                    let (a, i) = finish_key(&e.summary);
                    (a, i) < (*at, id.as_str())
                })
                .map(|e| e.summary.head.run_id.clone())
                .collect();
            older.extend(keys.iter().filter_map(|k| self.runs.remove(k)));
        }
        if older.is_empty() {
            self.finished_more = !complete;
        }
        let mut next = HashMap::with_capacity(summaries.len() + older.len());
        for entry in older {
            next.insert(entry.summary.head.run_id.clone(), entry);
        }
        for summary in summaries {
            let entry = match self.runs.remove(&summary.head.run_id) {
                Some(mut entry) => {
                    // An event newer than the answer stays (the answer was read first).
                    if version(&summary) >= version(&entry.summary) {
                        entry.summary = summary;
                    }
                    entry
                }
                None => RunEntry::new(summary),
            };
            next.insert(entry.summary.head.run_id.clone(), entry);
        }
        self.runs = next;
        self.rebuild_rows();
    }

    /// Adds the runs of a page loaded on scroll (`older`: the answer to `Request::Runs`
    /// with `before`, which held `limit` finished runs at most) or of a ledger search;
    /// runs already held keep what they have (events keep them fresh).
    pub fn add_runs(&mut self, summaries: Vec<RunSummary>, older: Option<u32>) {
        if let Some(limit) = older {
            let finished = summaries
                .iter()
                .filter(|s| s.head.state.is_terminal())
                .count();
            self.finished_more = finished >= limit as usize;
        }
        for summary in summaries {
            self.runs
                .entry(summary.head.run_id.clone())
                .or_insert_with(|| RunEntry::new(summary));
        }
        self.trim_finished();
        self.rebuild_rows();
    }

    /// Lets the oldest finished runs go beyond [`FINISHED_MAX`] (never the selected one,
    /// nor one the filter shows).
    fn trim_finished(&mut self) {
        let mut finished: Vec<(UnixMillis, String)> = self
            .runs
            .values()
            .filter(|e| e.summary.head.state.is_terminal())
            .map(|e| {
                let (at, id) = finish_key(&e.summary);
                (at, id.to_string())
            })
            .collect();
        if finished.len() <= FINISHED_MAX {
            return;
        }
        finished.sort_unstable_by(|a, b| b.cmp(a));
        let needle = self.filter.trim().to_lowercase();
        for (_, id) in finished.into_iter().skip(FINISHED_MAX) {
            let keep = self.selected.as_deref() == Some(id.as_str())
                || (!needle.is_empty()
                    && self
                        .runs
                        .get(&id)
                        .is_some_and(|e| matches_filter(&e.summary, &needle)));
            if !keep {
                self.runs.remove(&id);
                self.finished_more = true;
            }
        }
    }

    /// The finished run held that finished first: the next page starts after it.
    pub fn oldest_finished(&self) -> Option<&str> {
        self.runs
            .values()
            .filter(|e| e.summary.head.state.is_terminal())
            .map(|e| finish_key(&e.summary))
            .min()
            .map(|(_, id)| id)
    }

    /// Whether the next page of finished runs is wanted: the selection is near the end of
    /// the Finished tray, the ledger may hold older runs, and fewer than [`FINISHED_MAX`]
    /// are held. Not while a filter is on (its search covers the ledger).
    pub fn wants_older(&self) -> bool {
        if !self.finished_more || !self.filter.trim().is_empty() {
            return false;
        }
        let held = self
            .runs
            .values()
            .filter(|e| e.summary.head.state.is_terminal())
            .count();
        if held >= FINISHED_MAX {
            return false;
        }
        let Some(selected) = self.selected.as_deref() else {
            return false;
        };
        let Some(start) = self
            .rows
            .iter()
            .position(|r| matches!(r, Row::Header(Tray::Finished, _)))
        else {
            return false;
        };
        let tray = &self.rows[start + 1..];
        tray.iter()
            .position(|r| matches!(r, Row::Run(id) if id == selected))
            .is_some_and(|at| at + PAGE_AHEAD >= tray.len())
    }

    /// Adds or updates one run's summary.
    pub fn upsert(&mut self, summary: RunSummary) -> Applied {
        let mut applied = Applied {
            summary_changed: true,
            ..Applied::default()
        };
        let before = self
            .runs
            .get(&summary.head.run_id)
            .map(|e| e.summary.clone());
        // A run's `rev` (and its live state's seq) only grow: a summary behind the known
        // one is an old view arriving after a fresher one (a reply or a read overtaken by
        // an event on the other connection), and must not undo it.
        if before
            .as_ref()
            .is_some_and(|b| version(&summary) < version(b))
        {
            return Applied {
                stale: true,
                ..Applied::default()
            };
        }
        let need_before = before.as_ref().and_then(needs_you);
        let need_now = needs_you(&summary);
        // Permission requests notify on their own event; input and routes notify here.
        if need_before.is_none()
            && matches!(
                need_now,
                Some(
                    Need::Input
                        | Need::Route
                        | Need::Blocked
                        | Need::Escalation
                        | Need::Interrupted
                        | Need::Approval
                        | Need::Conflict
                )
            )
        {
            applied.started_needing = Some(format!(
                "{} {}",
                drover_core::text::clip(&summary.head.title, 60),
                need_now.map_or("", Need::words)
            ));
        }
        let entry = self
            .runs
            .entry(summary.head.run_id.clone())
            .or_insert_with(|| RunEntry::new(summary.clone()));
        if summary.head.state.is_terminal() {
            entry.pending.clear();
        }
        applied.pending_unknown = summary.pending != entry.pending.len();
        entry.summary = summary;
        self.rebuild_rows();
        applied
    }

    /// Applies one dispatcher event.
    pub fn apply(&mut self, event: &DispatchEvent) -> Applied {
        match event {
            DispatchEvent::RunChanged { run } => self.upsert(run.clone()),
            DispatchEvent::LiveState { run_id, live_state } => {
                if let Some(entry) = self.runs.get_mut(run_id) {
                    // An old event behind a fresher snapshot changes nothing.
                    if entry
                        .summary
                        .head
                        .live_state
                        .as_ref()
                        .is_some_and(|known| live_state.seq < known.seq)
                    {
                        return Applied {
                            stale: true,
                            ..Applied::default()
                        };
                    }
                    entry.summary.head.live_state = Some(live_state.clone());
                    if let Some(detail) = &mut entry.detail {
                        detail.head.live_state = Some(live_state.clone());
                    }
                }
                Applied::default()
            }
            DispatchEvent::Transcript { run_id, line, seq } => {
                if let Some(entry) = self.runs.get_mut(run_id) {
                    if let Some(held) = entry.transcript_seq {
                        if *seq != 0 && *seq <= held {
                            return Applied {
                                stale: true,
                                ..Applied::default()
                            };
                        }
                        entry.transcript_seq = None;
                    }
                    push_line(&mut entry.transcript, line.clone());
                    if let Some(heard) = &mut entry.heard_since_fetch {
                        heard.push((*seq, line.clone()));
                    }
                }
                Applied::default()
            }
            DispatchEvent::PermissionRequested { run_id, pending } => {
                let mut applied = Applied::default();
                if let Some(entry) = self.runs.get_mut(run_id) {
                    let known = entry
                        .pending
                        .iter()
                        .any(|p| p.request_id == pending.request_id)
                        || entry.settled.iter().any(|id| *id == pending.request_id);
                    if !known {
                        entry.pending.push(pending.clone());
                        entry.pending.sort_by_key(|p| p.created_at);
                    }
                    let what = match pending.kind {
                        RequestKind::Permission => format!("asks to use {}", pending.tool),
                        RequestKind::Question => "asks you a question".to_string(),
                    };
                    applied.started_needing = Some(format!(
                        "{} {what}",
                        drover_core::text::clip(&entry.summary.head.title, 60)
                    ));
                    if let Some(detail) = &mut entry.detail {
                        detail.pending = entry.pending.clone();
                    }
                }
                self.rebuild_rows();
                applied
            }
            DispatchEvent::PermissionResolved {
                run_id, request_id, ..
            } => {
                self.forget_pending(run_id, request_id);
                Applied::default()
            }
            DispatchEvent::Note { run_id, note } => {
                if let Some(detail) = self.runs.get_mut(run_id).and_then(|e| e.detail.as_mut()) {
                    detail.notes.push(note.clone());
                    if detail.notes.len() > NOTES_MAX {
                        detail.notes.remove(0);
                    }
                }
                Applied::default()
            }
            DispatchEvent::RunRemoved { run_id } => {
                self.runs.remove(run_id);
                self.rebuild_rows();
                Applied::default()
            }
            DispatchEvent::Health {
                config_refused,
                ledger_unavailable,
            } => {
                self.config_refused = config_refused.clone();
                self.ledger_unavailable = ledger_unavailable.clone();
                Applied::default()
            }
            DispatchEvent::Budget { note, .. } => {
                // The warning, the hard cap or a reopened session: said once, and the
                // header's gauge is fetched again.
                self.flash = Some(Flash {
                    text: note.clone(),
                    error: false,
                });
                Applied {
                    summary_changed: true,
                    ..Applied::default()
                }
            }
        }
    }

    /// Takes a request off a run's pending list (answered, withdrawn, expired).
    pub fn forget_pending(&mut self, run_id: &str, request_id: &str) {
        if let Some(entry) = self.runs.get_mut(run_id) {
            entry.pending.retain(|p| p.request_id != request_id);
            if let Some(detail) = &mut entry.detail {
                detail.pending.retain(|p| p.request_id != request_id);
            }
            if !entry.settled.iter().any(|id| id == request_id) {
                if entry.settled.len() == SETTLED_KEPT {
                    entry.settled.pop_front();
                }
                entry.settled.push_back(request_id.to_string());
            }
        }
    }

    /// Stores a run's full view (the answer to `Request::Show`).
    pub fn set_detail(&mut self, mut view: RunView) {
        let Some(entry) = self.runs.get_mut(&view.head.run_id) else {
            return;
        };
        view.pending
            .retain(|p| !entry.settled.iter().any(|id| *id == p.request_id));
        let seq = |l: &Option<drover_core::live_state::LiveState>| l.as_ref().map_or(0, |l| l.seq);
        // A view no newer than the events applied here (its live state's seq is not ahead)
        // may have been taken before a request they brought: that request stays, until its
        // own `PermissionResolved` settles it. Only a newer view replaces the list whole.
        if seq(&view.head.live_state) <= seq(&entry.summary.head.live_state) {
            for held in &entry.pending {
                if !view.pending.iter().any(|p| p.request_id == held.request_id) {
                    view.pending.push(held.clone());
                }
            }
        }
        view.pending.sort_by_key(|p| p.created_at);
        entry.pending = view.pending.clone();
        if seq(&view.head.live_state) >= seq(&entry.summary.head.live_state) {
            entry.summary.head.live_state = view.head.live_state.clone();
        }
        entry.detail = Some(view);
        self.rebuild_rows();
    }

    /// Notes that a run's transcript was asked for: lines heard from now on are kept
    /// aside until the answer comes.
    pub fn transcript_requested(&mut self, run_id: &str) {
        if let Some(entry) = self.runs.get_mut(run_id) {
            entry.heard_since_fetch = Some(Vec::new());
        }
    }

    /// Stores a run's transcript tail (the answer to `Request::Transcript`), followed by
    /// the lines heard since it was asked for that the answer does not hold: those newer
    /// than its `last_seq` when the owner told it (a line of it heard later is dropped
    /// then), else those it does not already end with.
    pub fn set_transcript(&mut self, run_id: &str, lines: Vec<String>, last_seq: Option<u64>) {
        if let Some(entry) = self.runs.get_mut(run_id) {
            let heard = entry.heard_since_fetch.take().unwrap_or_default();
            let newer: Vec<String> = match last_seq {
                Some(held) => heard
                    .into_iter()
                    .filter(|(seq, _)| *seq == 0 || *seq > held)
                    .map(|(_, line)| line)
                    .collect(),
                None => {
                    // The longest prefix of what was heard that the answer ends with.
                    let overlap = (0..=heard.len().min(lines.len()))
                        .rev()
                        .find(|&k| {
                            lines[lines.len() - k..]
                                .iter()
                                .eq(heard[..k].iter().map(|(_, line)| line))
                        })
                        .unwrap_or(0);
                    heard.into_iter().skip(overlap).map(|(_, l)| l).collect()
                }
            };
            entry.transcript_seq = last_seq;
            let mut all: VecDeque<String> = lines.into_iter().collect();
            all.extend(newer);
            while all.len() > TRANSCRIPT_MAX_LINES {
                all.pop_front();
            }
            entry.transcript = all;
            entry.transcript_loaded = true;
        }
    }

    /// The oldest pending request of any run, other than `except` (a request id).
    /// The directory run `run_id` works in (its worktree, or its shared directory).
    pub fn work_dir(&self, run_id: &str) -> Option<std::path::PathBuf> {
        let entry = self.run(run_id)?;
        let ws = entry.summary.workspace.as_deref()?;
        ws.dir.as_deref().map(std::path::PathBuf::from)
    }

    pub fn oldest_pending(&self, except: Option<&str>) -> Option<(&RunEntry, &PendingView)> {
        self.runs
            .values()
            .filter(|e| e.summary.head.state.is_active())
            .flat_map(|e| e.pending.iter().map(move |p| (e, p)))
            .filter(|(_, p)| Some(p.request_id.as_str()) != except)
            .min_by(|(_, a), (_, b)| {
                a.created_at
                    .cmp(&b.created_at)
                    .then_with(|| a.request_id.cmp(&b.request_id))
            })
    }

    /// How many requests are pending across all runs.
    pub fn pending_total(&self) -> usize {
        self.runs
            .values()
            .filter(|e| e.summary.head.state.is_active())
            .map(|e| e.pending.len().max(e.summary.pending))
            .sum()
    }

    /// The header's counts: runs per tray (the same rule as the trays, so the two agree;
    /// the filter aside), held runs among those that need you, and active runs.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in self.runs.values() {
            let s = &e.summary;
            if s.head.state.is_active() {
                c.active += 1;
            }
            if s.head.state == RunState::AwaitingRoute {
                c.held += 1;
            }
            match Tray::of(s) {
                Tray::NeedsYou => c.needs_you += 1,
                Tray::Running => c.running += 1,
                Tray::Idle => c.idle += 1,
                Tray::Queued => c.queued += 1,
                Tray::Finished => {}
            }
        }
        c
    }

    // ---- selection and the left pane ----

    /// Selects a run (if it is visible) and resets the transcript to follow its end.
    pub fn select(&mut self, run_id: &str) {
        if self
            .rows
            .iter()
            .any(|r| matches!(r, Row::Run(id) if id == run_id))
        {
            if self.selected.as_deref() != Some(run_id) {
                self.transcript_scroll = None;
            }
            self.selected = Some(run_id.to_string());
            self.keep_selection_visible();
        }
    }

    /// Moves the selection by `delta` runs (headers are skipped).
    pub fn move_selection(&mut self, delta: isize) {
        let ids: Vec<&String> = self.run_ids().collect();
        if ids.is_empty() {
            return;
        }
        let at = self
            .selected
            .as_ref()
            .and_then(|s| ids.iter().position(|id| *id == s))
            .unwrap_or(0) as isize;
        let next = (at + delta).clamp(0, ids.len() as isize - 1) as usize;
        let id = ids[next].clone();
        self.select(&id);
    }

    pub fn select_first(&mut self) {
        let first = self.run_ids().next().cloned();
        if let Some(id) = first {
            self.select(&id);
        }
    }

    pub fn select_last(&mut self) {
        let last = self.run_ids().last().cloned();
        if let Some(id) = last {
            self.select(&id);
        }
    }

    fn run_ids(&self) -> impl Iterator<Item = &String> {
        self.rows.iter().filter_map(|r| match r {
            Row::Run(id) => Some(id),
            Row::Header(..) => None,
        })
    }

    /// Lines available to the tray list at the current size.
    pub fn list_height(&self) -> usize {
        self.areas().trays_inner.height as usize
    }

    /// Where each part of the screen goes now: the terminal's size, and a footer tall
    /// enough for the last action's message (drawing and mouse hits read this one).
    pub fn areas(&self) -> super::layout::Areas {
        super::layout::Areas::with_footer(
            ratatui::layout::Rect::new(0, 0, self.width, self.height),
            self.footer_lines(),
        )
    }

    /// The footer's lines: the hints, and above them the message when it is too long to
    /// share their line (wrapped, at most [`FLASH_LINES`] lines).
    pub fn footer_lines(&self) -> u16 {
        match self.flash_lines() {
            Some(lines) => 1 + lines.len() as u16,
            None => 1,
        }
    }

    /// The message wrapped on lines of its own, when it does not fit beside the hints
    /// (more than two thirds of the line); `None` when it shares the hints' line.
    pub fn flash_lines(&self) -> Option<Vec<String>> {
        let flash = self.flash.as_ref()?;
        let width = self.width as usize;
        let text = drover_core::text::one_line(&flash.text);
        if super::canvas::width_of(&text) <= flash_room(width) {
            return None;
        }
        let mut lines = super::canvas::wrap(&text, width.saturating_sub(2).max(10));
        if lines.len() > FLASH_LINES {
            lines.truncate(FLASH_LINES);
            if let Some(last) = lines.last_mut() {
                *last = super::canvas::clip_width(&format!("{last} …"), width.saturating_sub(2));
            }
        }
        Some(lines)
    }

    /// Scrolls the left pane so the selected run's two lines are on screen, and never
    /// further than the end of the list needs (a pane that grew shows rows above rather
    /// than blank lines below).
    pub fn keep_selection_visible(&mut self) {
        let height = self.list_height().max(1);
        // Rows above come back while everything from there to the end fits.
        self.list_top = self.list_top.min(self.rows.len());
        let mut below: usize = self.rows.iter().skip(self.list_top).map(Row::height).sum();
        while self.list_top > 0 && below + self.rows[self.list_top - 1].height() <= height {
            self.list_top -= 1;
            below += self.rows[self.list_top].height();
        }
        let Some(index) = self.selected.as_ref().and_then(|s| {
            self.rows
                .iter()
                .position(|r| matches!(r, Row::Run(id) if id == s))
        }) else {
            self.list_top = self.list_top.min(self.rows.len().saturating_sub(1));
            return;
        };
        // Show the tray's header too when it sits right above the selected run.
        let want_top = if index > 0 && matches!(self.rows[index - 1], Row::Header(..)) {
            index - 1
        } else {
            index
        };
        if want_top < self.list_top {
            self.list_top = want_top;
        }
        while self.list_top < index
            && self.rows[self.list_top..=index]
                .iter()
                .map(Row::height)
                .sum::<usize>()
                > height
        {
            self.list_top += 1;
        }
    }

    /// The run at line `line` of the tray list (for mouse clicks).
    pub fn run_at_line(&self, line: usize) -> Option<&str> {
        let mut y = 0;
        for row in self.rows.iter().skip(self.list_top) {
            let h = row.height();
            if line < y + h {
                return match row {
                    Row::Run(id) => Some(id),
                    Row::Header(..) => None,
                };
            }
            y += h;
        }
        None
    }

    pub fn set_filter(&mut self, filter: String) {
        if filter.trim() != self.filter.trim() {
            self.found.clear();
        }
        self.filter = filter;
        self.rebuild_rows();
    }

    /// The lines the search index found for the filter (newest first): their runs pass
    /// the filter too, each showing its newest line.
    pub fn set_found(&mut self, hits: Vec<SearchHit>) {
        self.found.clear();
        for hit in hits {
            self.found.entry(hit.run_id.clone()).or_insert(hit);
        }
        self.rebuild_rows();
    }

    /// The line the search index found in this run for the filter, if any.
    pub fn found_line(&self, run_id: &str) -> Option<&SearchHit> {
        if self.filter.trim().is_empty() {
            return None;
        }
        self.found.get(run_id)
    }

    /// Regroups the (filtered) runs into trays, keeps the selection on a visible run.
    pub fn rebuild_rows(&mut self) {
        let needle = self.filter.trim().to_lowercase();
        let mut trays: [Vec<&RunEntry>; 5] = Default::default();
        for entry in self.runs.values() {
            if !needle.is_empty()
                && !matches_filter(&entry.summary, &needle)
                && !self.found.contains_key(&entry.summary.head.run_id)
            {
                continue;
            }
            trays[Tray::of(&entry.summary) as usize].push(entry);
        }
        let mut rows = Vec::with_capacity(self.runs.len() + Tray::ALL.len());
        let mut indents = HashMap::new();
        for tray in Tray::ALL {
            let list = &mut trays[tray as usize];
            if list.is_empty() {
                continue;
            }
            sort_tray(tray, list);
            rows.push(Row::Header(tray, list.len()));
            for (entry, indent) in nest(list) {
                let id = entry.summary.head.run_id.clone();
                if indent > 0 {
                    indents.insert(id.clone(), indent);
                }
                rows.push(Row::Run(id));
            }
        }
        self.rows = rows;
        self.indents = indents;
        let selected_visible = self.selected.as_ref().is_some_and(|s| {
            self.rows
                .iter()
                .any(|r| matches!(r, Row::Run(id) if id == s))
        });
        if !selected_visible {
            let first = self.run_ids().next().cloned();
            self.selected = first;
            self.transcript_scroll = None;
        }
        self.keep_selection_visible();
    }
}

/// Header counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// The Running tray.
    pub running: usize,
    /// The Idle tray.
    pub idle: usize,
    /// The Queued tray.
    pub queued: usize,
    /// Runs held on a route card (they are in Needs you).
    pub held: usize,
    /// The Needs-you tray.
    pub needs_you: usize,
    pub active: usize,
}

/// Where a run sits in the Finished tray's order (and in the ledger's pages): when it
/// finished, then its id.
fn finish_key(run: &RunSummary) -> (UnixMillis, &str) {
    (
        run.head.finished_at.unwrap_or(run.head.created_at),
        run.head.run_id.as_str(),
    )
}

fn matches_filter(run: &RunSummary, needle: &str) -> bool {
    [
        Some(run.head.title.as_str()),
        Some(run.head.provider.as_str()),
        run.head.model.as_deref(),
        Some(run.head.run_id.as_str()),
        Some(run.head.state.as_str()),
    ]
    .into_iter()
    .flatten()
    .any(|field| field.to_lowercase().contains(needle))
}

/// The order inside a tray: what waits longest for the user first; finished runs newest
/// first; the rest oldest first (the order they were dispatched).
/// The deepest a sub-run's row is indented (deeper ones line up at this depth).
pub const MAX_INDENT: usize = 4;

/// A sorted tray with each sub-run moved right under its parent when both are in the
/// tray (siblings keep the tray's order), and how deep under it each row sits. Every run
/// comes out once, whatever its lineage says (a parent chain that loops is laid flat).
fn nest<'a>(list: &[&'a RunEntry]) -> Vec<(&'a RunEntry, usize)> {
    let ids: std::collections::HashSet<&str> = list
        .iter()
        .map(|e| e.summary.head.run_id.as_str())
        .collect();
    let parent_of = |e: &'a RunEntry| -> Option<&'a str> {
        e.summary
            .parent_run
            .as_deref()
            .filter(|p| *p != e.summary.head.run_id && ids.contains(p))
    };
    let mut children: HashMap<&str, Vec<&'a RunEntry>> = HashMap::new();
    for entry in list {
        if let Some(parent) = parent_of(entry) {
            children.entry(parent).or_default().push(entry);
        }
    }
    let mut out = Vec::with_capacity(list.len());
    let mut placed = std::collections::HashSet::new();
    let roots = list.iter().filter(|e| parent_of(e).is_none());
    // Then whatever a loop kept from being reached from a root, flat.
    let rest = list.iter().filter(|e| parent_of(e).is_some());
    for root in roots.chain(rest) {
        let mut stack = vec![(*root, 0usize)];
        while let Some((entry, depth)) = stack.pop() {
            if !placed.insert(entry.summary.head.run_id.as_str()) {
                continue;
            }
            out.push((entry, depth.min(MAX_INDENT)));
            if let Some(kids) = children.get(entry.summary.head.run_id.as_str()) {
                stack.extend(kids.iter().rev().map(|k| (*k, depth + 1)));
            }
        }
    }
    out
}

fn sort_tray(tray: Tray, list: &mut [&RunEntry]) {
    match tray {
        Tray::NeedsYou => list.sort_by(|a, b| {
            // From the row alone (what every launch knows at once), never from requests
            // fetched later: the order is the same from one launch to the next.
            let since = |e: &RunEntry| {
                e.summary
                    .head
                    .live_state
                    .as_ref()
                    .map_or(e.summary.head.created_at, |l| l.since)
            };
            since(a)
                .cmp(&since(b))
                .then_with(|| a.summary.head.run_id.cmp(&b.summary.head.run_id))
        }),
        Tray::Finished => list.sort_by(|a, b| {
            let end = |e: &RunEntry| {
                e.summary
                    .head
                    .finished_at
                    .unwrap_or(e.summary.head.created_at)
            };
            end(b)
                .cmp(&end(a))
                .then_with(|| b.summary.head.run_id.cmp(&a.summary.head.run_id))
        }),
        _ => list.sort_by(|a, b| {
            a.summary
                .head
                .created_at
                .cmp(&b.summary.head.created_at)
                .then_with(|| a.summary.head.run_id.cmp(&b.summary.head.run_id))
        }),
    }
}

fn push_line(lines: &mut VecDeque<String>, line: String) {
    lines.push_back(line);
    while lines.len() > TRANSCRIPT_MAX_LINES {
        lines.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::dispatch::api::NoteView;

    fn summary(id: &str, state: RunState) -> RunSummary {
        RunSummary::example(id, state)
    }

    fn pending(id: &str, at: UnixMillis) -> PendingView {
        PendingView {
            request_id: id.into(),
            kind: RequestKind::Permission,
            tool: "Bash".into(),
            ask: drover_core::providers::Ask::command("ls", None, None),
            always: None,
            created_at: at,
            expires_at: at + 600_000,
            guard: None,
        }
    }

    fn live(
        seq: u64,
        state: drover_core::live_state::LiveStateKind,
    ) -> drover_core::live_state::LiveState {
        drover_core::live_state::LiveState {
            state,
            since: 1_000,
            bound: Some(2_000),
            detail: None,
            cause: None,
            seq,
        }
    }

    #[test]
    fn old_events_behind_a_fresher_snapshot_change_nothing() {
        use drover_core::live_state::LiveStateKind::Admitted;
        // A `runs` answer (a snapshot) can overtake the events published before it.
        let mut m = ViewModel::new(0, 120, 40);
        let mut held = summary("h", RunState::AwaitingRoute);
        held.head.live_state = Some(live(2, Admitted));
        m.replace_runs(vec![held]);

        let old_live = DispatchEvent::LiveState {
            run_id: "h".into(),
            live_state: live(1, Admitted),
        };
        assert!(m.apply(&old_live).stale);
        let mut queued = summary("h", RunState::Queued);
        queued.head.live_state = Some(live(1, Admitted));
        let old_change = DispatchEvent::RunChanged { run: queued };
        assert!(m.apply(&old_change).stale);
        let entry = m.run("h").expect("the run");
        assert_eq!(entry.summary.head.state, RunState::AwaitingRoute);
        assert_eq!(
            entry.summary.head.live_state.as_ref().map(|l| l.seq),
            Some(2)
        );

        // Events at or past the known seq apply.
        let mut started = summary("h", RunState::Starting);
        started.head.live_state = Some(live(3, Admitted));
        let applied = m.apply(&DispatchEvent::RunChanged { run: started });
        assert!(!applied.stale);
        assert_eq!(m.run("h").unwrap().summary.head.state, RunState::Starting);
        assert!(m.apply(&old_live).stale, "seq 1 is behind 3");
        let seq = m
            .run("h")
            .unwrap()
            .summary
            .head
            .live_state
            .as_ref()
            .map(|l| l.seq);
        assert_eq!(seq, Some(3));

        // A reply or read made before an event and arriving after it is behind by its
        // rev, even when the live state did not move between them.
        let mut idle = summary("h", RunState::Idle);
        idle.head.live_state = Some(live(3, Admitted));
        idle.head.rev = 9;
        assert!(!m.upsert(idle).stale);
        let mut running = summary("h", RunState::Running);
        running.head.live_state = Some(live(3, Admitted));
        running.head.rev = 7;
        assert!(m.upsert(running.clone()).stale);
        m.replace_runs(vec![running]);
        assert_eq!(m.run("h").unwrap().summary.head.state, RunState::Idle);
    }

    #[test]
    fn sub_runs_sit_under_their_parent_and_a_looping_lineage_is_laid_flat() {
        let child = |id: &str, parent: &str| {
            let mut s = summary(id, RunState::Running);
            s.parent_run = Some(parent.to_string());
            s
        };
        let mut m = ViewModel::new(0, 100, 40);
        m.replace_runs(vec![
            summary("p", RunState::Running),
            child("c1", "p"),
            child("g", "c1"),
            // A parent in another tray: a top row here.
            child("q", "p-elsewhere"),
            // A loop and a run that names itself: each shown once, flat.
            child("x", "y"),
            child("y", "x"),
            child("self", "self"),
        ]);
        let ids: Vec<&str> = m.run_ids().map(String::as_str).collect();
        let at = |id: &str| ids.iter().position(|i| *i == id).unwrap();
        assert_eq!(ids.len(), 7, "{ids:?}");
        assert_eq!(at("c1"), at("p") + 1, "{ids:?}");
        assert_eq!(at("g"), at("c1") + 1, "{ids:?}");
        assert_eq!(
            [m.indent("p"), m.indent("c1"), m.indent("g"), m.indent("q")],
            [0, 1, 2, 0]
        );
        assert_eq!(m.indent("self"), 0);
        assert_eq!(
            m.indent("x") + m.indent("y"),
            1,
            "one of the loop under the other"
        );
    }

    #[test]
    fn the_needs_you_order_does_not_move_when_requests_load() {
        let mut a = summary("a", RunState::AwaitingPermission);
        a.pending = 1;
        let mut l = live(1, drover_core::live_state::LiveStateKind::Working);
        l.since = 500;
        a.head.live_state = Some(l.clone());
        let mut b = summary("b", RunState::AwaitingPermission);
        b.pending = 1;
        l.since = 900;
        b.head.live_state = Some(l);
        let mut m = ViewModel::new(1_000, 120, 40);
        m.replace_runs(vec![b, a]);
        let before = m.rows().to_vec();
        // b's request loads, with a time older than a's row says.
        m.apply(&DispatchEvent::PermissionRequested {
            run_id: "b".into(),
            pending: pending("p-b", 100),
        });
        assert_eq!(m.rows(), before.as_slice());
        assert_eq!(before[1], Row::Run("a".into()));
    }

    #[test]
    fn runs_fall_into_their_trays() {
        let mut needs_input = summary("a", RunState::Idle);
        needs_input.needs_input = true;
        let mut asking = summary("b", RunState::Running);
        asking.pending = 1;
        let mut blocked = summary("k", RunState::Idle);
        blocked.result_status = Some("blocked".into());
        let mut offered = summary("o", RunState::Idle);
        offered.result_status = Some("blocked".into());
        offered.escalation_offered = true;
        let mut offered_done = summary("e", RunState::Failed);
        offered_done.escalation_offered = true;
        // A run in a follow-up turn after a blocked one waits for the turn, not for you.
        let mut blocked_busy = summary("w", RunState::Running);
        blocked_busy.result_status = Some("blocked".into());
        blocked_busy.escalation_offered = true;
        let table = [
            (blocked, Tray::NeedsYou),
            (offered, Tray::NeedsYou),
            (offered_done, Tray::NeedsYou),
            (blocked_busy, Tray::Running),
            (summary("q", RunState::Queued), Tray::Queued),
            (summary("s", RunState::Starting), Tray::Running),
            (summary("r", RunState::Running), Tray::Running),
            (summary("i", RunState::Idle), Tray::Idle),
            (needs_input, Tray::NeedsYou),
            (asking, Tray::NeedsYou),
            (summary("p", RunState::AwaitingPermission), Tray::NeedsYou),
            (summary("h", RunState::AwaitingRoute), Tray::NeedsYou),
            (summary("c", RunState::Completed), Tray::Finished),
            (summary("f", RunState::Failed), Tray::Finished),
            (summary("x", RunState::Stopped), Tray::Finished),
            // Interrupted by a restart: it needs the user, it has not finished.
            (summary("z", RunState::Interrupted), Tray::NeedsYou),
        ];
        for (run, tray) in table {
            assert_eq!(Tray::of(&run), tray, "{}", run.head.run_id);
        }
    }

    #[test]
    fn selection_follows_the_run_across_trays_and_skips_headers() {
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![
            summary("a", RunState::Running),
            summary("b", RunState::Queued),
        ]);
        assert_eq!(m.selected(), Some("a"));
        m.move_selection(1);
        assert_eq!(m.selected(), Some("b"));
        m.move_selection(5);
        assert_eq!(m.selected(), Some("b"));
        // b starts running: it moves tray, the selection stays on it.
        m.upsert(summary("b", RunState::Running));
        assert_eq!(m.selected(), Some("b"));
        assert_eq!(
            m.rows(),
            &[
                Row::Header(Tray::Running, 2),
                Row::Run("a".into()),
                Row::Run("b".into())
            ]
        );
    }

    #[test]
    fn the_filter_hides_rows_and_moves_the_selection_to_a_visible_run() {
        let mut m = ViewModel::new(0, 120, 40);
        let mut b = summary("b", RunState::Running);
        b.head.title = "Fix the login bug".into();
        m.replace_runs(vec![summary("a", RunState::Running), b]);
        m.select("a");
        m.set_filter("LOGIN".into());
        assert_eq!(m.selected(), Some("b"));
        assert_eq!(m.rows().len(), 2);
    }

    #[test]
    fn pending_requests_come_and_go_and_the_oldest_is_first() {
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![
            summary("a", RunState::Running),
            summary("b", RunState::Running),
        ]);
        let applied = m.apply(&DispatchEvent::PermissionRequested {
            run_id: "a".into(),
            pending: pending("late", 5_000),
        });
        assert_eq!(
            applied.started_needing.as_deref(),
            Some("run a asks to use Bash")
        );
        m.apply(&DispatchEvent::PermissionRequested {
            run_id: "b".into(),
            pending: pending("early", 2_000),
        });
        let (entry, p) = m.oldest_pending(None).unwrap();
        assert_eq!(
            (entry.summary.head.run_id.as_str(), p.request_id.as_str()),
            ("b", "early")
        );
        let (_, p) = m.oldest_pending(Some("early")).unwrap();
        assert_eq!(p.request_id, "late");
        m.apply(&DispatchEvent::PermissionResolved {
            run_id: "b".into(),
            request_id: "early".into(),
            how: "allow".into(),
        });
        assert_eq!(m.oldest_pending(None).unwrap().1.request_id, "late");
    }

    #[test]
    fn needing_input_is_announced_once() {
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![summary("a", RunState::Running)]);
        let mut idle = summary("a", RunState::Idle);
        idle.needs_input = true;
        assert_eq!(
            m.upsert(idle.clone()).started_needing.as_deref(),
            Some("run a needs input")
        );
        assert_eq!(m.upsert(idle).started_needing, None);
    }

    #[test]
    fn transcripts_are_bounded_and_notes_reach_a_loaded_detail() {
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![summary("a", RunState::Running)]);
        for i in 0..(TRANSCRIPT_MAX_LINES + 10) {
            m.apply(&DispatchEvent::Transcript {
                run_id: "a".into(),
                line: format!("line {i}"),
                seq: 0,
            });
        }
        let t = &m.run("a").unwrap().transcript;
        assert_eq!(t.len(), TRANSCRIPT_MAX_LINES);
        assert_eq!(t.front().unwrap(), "line 10");
        // A note for a run whose detail is not loaded is not invented into one.
        m.apply(&DispatchEvent::Note {
            run_id: "a".into(),
            note: NoteView {
                at: 1,
                text: "hello".into(),
            },
        });
        assert!(m.run("a").unwrap().detail.is_none());
    }

    #[test]
    fn a_fetched_transcript_keeps_the_lines_heard_while_it_was_on_its_way() {
        let line = |run: &str, text: &str| DispatchEvent::Transcript {
            run_id: run.into(),
            line: text.into(),
            seq: 0,
        };
        // The answer was taken before "c" was published: "c" is added after it.
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![summary("a", RunState::Running)]);
        m.transcript_requested("a");
        m.apply(&line("a", "c"));
        m.set_transcript("a", vec!["a".into(), "b".into()], None);
        assert_eq!(m.run("a").unwrap().transcript, ["a", "b", "c"]);
        // The answer already holds "c": it is not repeated.
        m.transcript_requested("a");
        m.apply(&line("a", "c"));
        m.set_transcript("a", vec!["a".into(), "b".into(), "c".into()], None);
        assert_eq!(m.run("a").unwrap().transcript, ["a", "b", "c"]);
    }

    #[test]
    fn a_line_the_fetched_transcript_holds_is_not_repeated_when_it_is_heard_after_it() {
        let line = |text: &str, seq: u64| DispatchEvent::Transcript {
            run_id: "a".into(),
            line: text.into(),
            seq,
        };
        let mut m = ViewModel::new(0, 120, 40);
        m.replace_runs(vec![summary("a", RunState::Running)]);
        m.transcript_requested("a");
        // "b" (seq 4) was heard before the answer; the answer holds up to "d" (seq 6),
        // whose events reach the dashboard only after it (they wait for their commit).
        m.apply(&line("b", 4));
        m.set_transcript(
            "a",
            vec!["a".into(), "b".into(), "c".into(), "d".into()],
            Some(6),
        );
        assert_eq!(m.run("a").unwrap().transcript, ["a", "b", "c", "d"]);
        assert!(m.apply(&line("c", 5)).stale);
        assert!(m.apply(&line("d", 6)).stale);
        m.apply(&line("e", 7));
        // Past the answer, nothing is held back (a restarted owner's lines included).
        m.apply(&line("f", 2));
        assert_eq!(
            m.run("a").unwrap().transcript,
            ["a", "b", "c", "d", "e", "f"]
        );
    }

    #[test]
    fn the_list_scrolls_to_keep_the_selection_in_view() {
        // 80x24: the tray list has a handful of lines.
        let mut m = ViewModel::new(0, 80, 24);
        m.replace_runs(
            (0..30)
                .map(|i| {
                    let mut s = summary(&format!("r{i:02}"), RunState::Running);
                    s.head.created_at = i;
                    s
                })
                .collect(),
        );
        m.select_last();
        let height = m.list_height();
        let shown: usize = m.rows()[m.list_top..].iter().map(Row::height).sum();
        assert!(shown <= m.rows().len() * 2);
        assert_eq!(
            m.run_at_line(height - 2),
            Some("r29"),
            "last run at the bottom"
        );
        m.select_first();
        assert_eq!(m.list_top, 0);
        assert_eq!(m.run_at_line(1), Some("r00"));
        assert_eq!(m.run_at_line(0), None, "line 0 is the tray header");
    }

    fn finished(id: &str, at: i64) -> RunSummary {
        let mut s = summary(id, RunState::Completed);
        s.head.finished_at = Some(at);
        s
    }

    #[test]
    fn a_fresh_window_keeps_older_pages_and_drops_what_left_the_window() {
        let mut m = ViewModel::new(0, 120, 40);
        // The first window: one active run, two finished (the page was full).
        m.replace_window(
            vec![
                summary("a", RunState::Running),
                finished("f9", 900),
                finished("f8", 800),
            ],
            Some(2),
        );
        assert_eq!(m.oldest_finished(), Some("f8"));
        m.add_runs(vec![finished("f7", 700), finished("f6", 600)], Some(2));
        assert_eq!(m.run_count(), 5);
        assert_eq!(m.oldest_finished(), Some("f6"));
        // A refresh: f9 was removed, a new run finished; the older page stays.
        m.replace_window(
            vec![
                summary("a", RunState::Running),
                finished("f10", 1_000),
                finished("f8", 800),
            ],
            Some(2),
        );
        let mut ids: Vec<&str> = m.runs().map(|e| e.summary.head.run_id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["a", "f10", "f6", "f7", "f8"]);
    }

    #[test]
    fn the_next_page_is_wanted_near_the_end_of_the_finished_tray_only() {
        let mut m = ViewModel::new(0, 120, 40);
        let page: Vec<RunSummary> = (0..30)
            .map(|i| finished(&format!("f{i:02}"), 10_000 - i))
            .collect();
        m.replace_window(page, Some(30));
        m.select_first();
        assert!(!m.wants_older(), "the top of the tray");
        m.select_last();
        assert!(m.wants_older(), "the end of a full page");
        m.set_filter("f0".into());
        assert!(!m.wants_older(), "a filter searches the ledger instead");
        m.set_filter(String::new());
        // A page that was not full: nothing older is left.
        m.add_runs(vec![finished("f99", 1)], Some(30));
        m.select_last();
        assert!(!m.wants_older());
    }

    #[test]
    fn finished_runs_held_stay_bounded_keeping_the_selected_one() {
        let mut m = ViewModel::new(0, 120, 40);
        let first: Vec<RunSummary> = (0..FINISHED_MAX as i64)
            .map(|i| finished(&format!("n{i:05}"), 1_000_000 - i))
            .collect();
        m.replace_window(first, Some(FINISHED_MAX as u32));
        m.select_last();
        let selected = m.selected().map(str::to_string);
        m.add_runs(
            (0..10)
                .map(|i| finished(&format!("o{i}"), 10 - i))
                .collect(),
            None,
        );
        let held = m
            .runs()
            .filter(|e| e.summary.head.state.is_terminal())
            .count();
        assert!(held <= FINISHED_MAX + 1, "{held} held");
        assert!(
            m.run(selected.as_deref().unwrap()).is_some(),
            "the selection stays"
        );
        assert!(!m.wants_older(), "at the cap no page is asked for");
    }
}
