//! Human output of the headless run commands: short, aligned lines built from the API's
//! views. `--json` output never comes through here.
//!
//! What must stay true: pure functions of the view (and of `now`, passed in); text that
//! came from a provider or a user is folded to one line (control characters become
//! spaces, so a transcript cannot drive the terminal); an answer of an unexpected shape
//! is shown as JSON rather than refused.

use drover_core::UnixMillis;
use drover_core::dispatch::DispatchEvent;
use drover_core::dispatch::api::{
    DiffView, ResultView, RunSummary, RunView, SearchSource, SearchView, TranscriptFormat,
    TranscriptView, WaitOutcome, WorkspaceActionView, WorkspaceView,
};
use drover_core::live_state::LiveState;
use drover_core::money::usd;
use drover_core::providers::RequestKind;
use drover_core::run_state::RunState;
use drover_core::text::{clip, one_line, provider_model};
use drover_core::workspace::WorkspaceStatus;

/// The longest title shown in a table row.
const TITLE_COLUMN_CHARS: usize = 60;
/// The longest free text (task, previews, notes) shown on one line.
const TEXT_CHARS: usize = 120;

/// An answer with no human form of its own: pretty JSON and a newline.
pub fn pretty_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// `12s`, `5m`, `3h`, `2d` since `then`.
pub fn age(now: UnixMillis, then: UnixMillis) -> String {
    let secs = (now - then).max(0) / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

/// How to answer a pending request from the command line.
fn answer_hint(pending: &drover_core::dispatch::api::PendingView) -> String {
    match pending.kind {
        drover_core::providers::RequestKind::Permission => "allow|always|deny".to_string(),
        drover_core::providers::RequestKind::Question => {
            let question = pending
                .ask
                .questions()
                .first()
                .map_or("QUESTION", |q| q.question.as_str());
            format!("allow --answer \"{question}=CHOICE\" (or deny)")
        }
    }
}

/// Rows padded to their widest cell; the last column is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(
                    ' ',
                    widths[c] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A run's state with its end reason, `failed (provider_error)`; a reason that only says
/// the state again (`interrupted`) is left out.
pub(crate) fn state_with_reason(state: RunState, reason: Option<&str>) -> String {
    match reason.filter(|r| *r != state.as_str()) {
        Some(reason) => format!("{state} ({reason})"),
        None => state.as_str().to_string(),
    }
}

/// The state column: the run state, then what needs attention.
fn state_cell(run: &RunSummary) -> String {
    let mut cell = state_with_reason(run.head.state, run.head.completion_reason.as_deref());
    if run.pending > 0 {
        cell.push_str(&format!(" · {} pending", run.pending));
    }
    if run.needs_input {
        cell.push_str(" · needs input");
    }
    if run.head.stalled {
        cell.push_str(" · stalled");
    }
    if run.head.owner_gone {
        cell.push_str(" · owner gone");
    }
    if let Some(change) = run
        .workspace
        .as_ref()
        .filter(|w| w.has_worktree())
        .and_then(|w| w.change)
        .filter(|c| !c.is_empty())
    {
        cell.push_str(&format!(" · {}", change.words()));
    }
    cell
}

/// A workspace in words: `worktree /…/r1 on drover/r1-fix (from main at 3f2a1b0c9d) ·
/// +12 −3 · 4 files`, or `shared /home/me/app`.
fn workspace_words(ws: &WorkspaceView) -> String {
    if !ws.is_worktree() {
        return format!("shared {}", ws.dir.as_deref().unwrap_or("?"));
    }
    let mut words = format!(
        "worktree {}",
        ws.worktree.as_deref().unwrap_or("(not made yet)")
    );
    if let Some(branch) = &ws.branch {
        words.push_str(&format!(" on {branch}"));
    }
    let base = drover_core::workspace::short_commit(ws.base_commit.as_deref());
    match &ws.base_branch {
        Some(b) => words.push_str(&format!(" (from {b} at {base})")),
        None if ws.base_commit.is_some() => words.push_str(&format!(" (from {base})")),
        None => {}
    }
    if ws.status != WorkspaceStatus::Ready {
        words.push_str(&format!(" · {}", ws.status.as_str()));
    }
    if let Some(change) = ws.change.filter(|_| ws.has_worktree()) {
        words.push_str(&format!(
            " · {}",
            if change.is_empty() {
                "no change".to_string()
            } else {
                change.words()
            }
        ));
    }
    words
}

/// `drover diff`: git's unified diff as it printed it, or with `--stat` one line per file
/// (`+added −removed path`) and the totals.
pub fn diff(view: &DiffView) -> String {
    let base = drover_core::workspace::short_commit(view.base_commit.as_deref());
    let against = match &view.base_branch {
        Some(b) => format!("{b} at {base}"),
        None => base,
    };
    let mut out = String::new();
    match &view.patch {
        Some(patch) => {
            if patch.is_empty() {
                out.push_str(&format!("no changes against {against}\n"));
            } else {
                out.push_str(patch);
                if !patch.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        None => {
            let rows: Vec<Vec<String>> = view
                .files
                .iter()
                .map(|f| {
                    let counts = if f.binary {
                        vec!["bin".to_string(), String::new()]
                    } else {
                        vec![format!("+{}", f.added), format!("−{}", f.removed)]
                    };
                    let path = match &f.old_path {
                        Some(old) => format!("{} → {}", one_line(old), one_line(&f.path)),
                        None => one_line(&f.path),
                    };
                    counts.into_iter().chain([f.status.clone(), path]).collect()
                })
                .collect();
            out.push_str(&table(&rows));
            out.push_str(&format!(
                "{} against {against}\n",
                if view.change.is_empty() {
                    "no changes".to_string()
                } else {
                    view.change.words()
                }
            ));
        }
    }
    if view.truncated {
        out.push_str(
            "(cut: the diff is larger than drover shows; see it with git in the worktree)\n",
        );
    }
    out
}

/// `drover merge`, `keep`, `discard`: what was done.
/// What `drover pr` did: the push, then the pull request (or where to open one).
pub fn pr_action(view: &drover_core::dispatch::api::PrActionView) -> String {
    let mut text = String::new();
    if let Some(push) = &view.push {
        text.push_str(&format!(
            "pushed {} to {} at {}{}\n",
            push.branch,
            push.remote,
            drover_core::workspace::short_commit(Some(&push.commit)),
            if push.forced {
                " (--force-with-lease)"
            } else {
                ""
            }
        ));
    }
    match (&view.pr, &view.push) {
        (Some(pr), _) => {
            let verb = if view.created {
                "opened"
            } else if view.push.is_some() {
                "updated"
            } else {
                "read"
            };
            text.push_str(&format!("{verb} {}\n{}\n", pr.words(), pr.url));
        }
        (None, Some(push)) => {
            if let Some(cli) = &view.forge_cli_missing {
                text.push_str(&format!(
                    "`{cli}` is not on PATH: no pull request was opened\n"
                ));
            }
            match &push.compare_url {
                Some(url) => text.push_str(&format!("open a pull request at {url}\n")),
                None => text.push_str("the remote gave no address for opening a pull request\n"),
            }
        }
        (None, None) => {}
    }
    text
}

pub fn workspace_action(view: &WorkspaceActionView) -> String {
    let ws = &view.workspace;
    let branch = ws.branch.as_deref().unwrap_or("its branch");
    match (&view.merge, view.action.as_str()) {
        (Some(m), _) => {
            let commit = drover_core::workspace::short_commit(Some(&m.commit));
            let mut text = match m.how {
                drover_core::workspace::MergeHow::UpToDate => {
                    format!("{} already has everything of {branch}\n", m.into)
                }
                how => format!(
                    "merged {} ({branch}) into {}: {} at {commit}, {} file{} changed\n",
                    view.run_id,
                    m.into,
                    how.words(),
                    m.files.len(),
                    drover_core::text::plural(m.files.len())
                ),
            };
            if !m.checkout_updated && m.how != drover_core::workspace::MergeHow::UpToDate {
                text.push_str(&format!(
                    "your checkout is not on {}: only the branch moved\n",
                    m.into
                ));
            }
            if m.cleaned_up {
                text.push_str("the run's worktree and branch are removed\n");
            }
            text
        }
        (None, "update") => {
            use drover_core::workspace::UpdateHow;
            let Some(u) = &view.update else {
                return format!("updated {branch}\n");
            };
            let commit = drover_core::workspace::short_commit(Some(&u.commit));
            let files = u.files.len();
            let plural = drover_core::text::plural(files);
            match u.how {
                UpdateHow::UpToDate => format!("{branch} already has everything of {}\n", u.base),
                UpdateHow::Merged => format!(
                    "merged {} into {branch} at {commit}: {files} file{plural} changed\n",
                    u.base
                ),
                UpdateHow::Rebased => format!(
                    "rebased {branch} on {} (now {commit}): {files} file{plural} changed\n",
                    u.base
                ),
                UpdateHow::Conflict => format!(
                    "{branch} conflicts with {} in {}; nothing was changed\nto hand it to the run:\n  drover follow-up {} {}\n",
                    u.base,
                    u.files.join(", "),
                    view.run_id,
                    shell_words::quote(u.follow_up.as_deref().unwrap_or_default())
                ),
            }
        }
        (None, "keep") => format!(
            "kept {branch}; the worktree of {} is removed\n",
            view.run_id
        ),
        (None, _) => format!(
            "discarded the worktree and the branch {branch} of {}\n",
            view.run_id
        ),
    }
}

/// `drover runs`: one aligned row per run.
pub fn runs_table(runs: &[RunSummary], now: UnixMillis) -> String {
    if runs.is_empty() {
        return "no runs\n".to_string();
    }
    let mut rows = vec![
        ["RUN", "STATE", "SPENT", "AGE", "PROVIDER", "TITLE"]
            .map(String::from)
            .to_vec(),
    ];
    for run in runs {
        rows.push(vec![
            run.head.run_id.clone(),
            state_cell(run),
            format!("{} of {}", usd(run.head.cost_usd), usd(run.head.budget_usd)),
            age(now, run.head.created_at),
            provider_model(&run.head.provider, run.head.model.as_deref()),
            clip(&one_line(&run.head.title), TITLE_COLUMN_CHARS),
        ]);
    }
    table(&rows)
}

/// `drover search`: one line per match — run, age, where it comes from, and the words
/// around the match with each match in `[…]`.
pub fn search(view: &SearchView, now: UnixMillis) -> String {
    if view.hits.is_empty() {
        return "nothing found\n".to_string();
    }
    let mut rows = vec![["RUN", "AGE", "IN", "LINE"].map(String::from).to_vec()];
    for hit in &view.hits {
        let place = match (hit.source, hit.turn) {
            (SearchSource::FollowUp | SearchSource::Text | SearchSource::Result, Some(turn)) => {
                format!("{} (turn {turn})", hit.source.as_str())
            }
            (source, _) => source.as_str().to_string(),
        };
        rows.push(vec![
            hit.run_id.clone(),
            age(now, hit.at),
            place,
            hit.marked("[", "]"),
        ]);
    }
    table(&rows)
}

fn live_line(live: &LiveState) -> String {
    // An end with a detail says what happened in words (a restart's interruption).
    if let (true, Some(detail)) = (live.state.is_terminal(), &live.detail) {
        return one_line(detail);
    }
    let mut line = live.state.human().to_string();
    if let Some(cause) = live.cause {
        line.push_str(&format!(" ({})", cause.as_str()));
    }
    if let Some(detail) = &live.detail {
        line.push_str(&format!(": {}", one_line(detail)));
    }
    line
}

fn result_lines(result: &ResultView) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    let status = result.status.as_deref().unwrap_or("no status");
    let head = match &result.summary {
        Some(summary) => format!("{status}: {}", clip(&one_line(summary), TEXT_CHARS)),
        None => status.to_string(),
    };
    lines.push(("result".to_string(), head));
    if let Some(question) = &result.question {
        lines.push((String::new(), format!("question: {}", one_line(question))));
    }
    for (label, items) in [
        ("changes", &result.changes),
        ("files", &result.files),
        ("follow-ups", &result.follow_ups),
    ] {
        if !items.is_empty() {
            let items: Vec<String> = items.iter().map(|i| one_line(i)).collect();
            lines.push((String::new(), format!("{label}: {}", items.join(", "))));
        }
    }
    if let Some(json) = &result.json {
        lines.push((String::new(), format!("json: {json}")));
    }
    lines
}

/// `drover show`: the run, key by key.
/// How many of a run's last decisions `show` prints.
const DECISIONS_SHOWN_TEXT: usize = 10;

pub fn run_view(run: &RunView, now: UnixMillis) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut push = |key: &str, value: String| lines.push((key.to_string(), value));
    push(
        "run",
        format!("{}  {}", run.head.run_id, one_line(&run.head.title)),
    );
    let mut state = state_with_reason(run.head.state, run.head.completion_reason.as_deref());
    if run.head.stalled {
        state.push_str(" · stalled: no provider event for a while");
    }
    if run.head.state == drover_core::run_state::RunState::AwaitingRoute {
        state.push_str(&format!(
            " · `drover routes` shows its card; `drover route {} N` picks",
            run.head.run_id
        ));
    }
    if run.head.owner_gone {
        state.push_str(&format!(
            " · its drover is gone (a crash): the next `drover serve` marks it interrupted, then `drover resume {}` goes on",
            run.head.run_id
        ));
    }
    push("state", state);
    if let Some(live) = &run.head.live_state {
        push("live", live_line(live));
    }
    if let Some(need) = &run.needs_you {
        push(
            "needs you",
            format!("{} · for {}", need.reason.words(), age(now, need.since)),
        );
    }
    push(
        "provider",
        provider_model(&run.head.provider, run.head.model.as_deref()),
    );
    push("task", clip(&one_line(&run.task), TEXT_CHARS));
    match &run.head.host {
        Some(host) => push("cwd", format!("{} @{host}", run.cwd)),
        None => push("cwd", run.cwd.clone()),
    }
    if let Some(ws) = &run.workspace {
        push("workspace", workspace_words(ws));
    }
    push(
        "policy",
        if run.sandbox {
            format!("{} · ⊡ sandbox (bubblewrap)", run.policy)
        } else {
            run.policy.clone()
        },
    );
    push(
        "spent",
        format!(
            "{} of {} ({})",
            usd(run.head.cost_usd),
            usd(run.head.budget_usd),
            run.cost_basis
        ),
    );
    let t = &run.tokens;
    push(
        "tokens",
        format!(
            "{} in · {} out · {} reasoning · {} cache read · {} cache write",
            t.input, t.output, t.reasoning, t.cache_read, t.cache_write
        ),
    );
    let mut turns = format!("{} of at most {}", run.turns.len(), run.max_turns);
    if run.queued_follow_ups > 0 {
        turns.push_str(&format!(
            " · {} follow-up{} queued",
            run.queued_follow_ups,
            drover_core::text::plural(run.queued_follow_ups)
        ));
    }
    push("turns", turns);
    let turn_rows: Vec<Vec<String>> = run
        .turns
        .iter()
        .map(|turn| {
            vec![
                turn.number.to_string(),
                turn.origin.clone(),
                turn.cost_usd.map(usd).unwrap_or_else(|| "-".into()),
                clip(&one_line(&turn.prompt_preview), TEXT_CHARS),
            ]
        })
        .collect();
    for line in table(&turn_rows).lines() {
        push("", line.to_string());
    }
    for pending in &run.pending {
        push(
            "pending",
            format!(
                "{} {} {}: drover respond {} {} {}",
                pending.request_id,
                kind_words(pending.kind),
                one_line(&pending.tool),
                run.head.run_id,
                pending.request_id,
                answer_hint(pending)
            ),
        );
        // What it asks: the command, the path, the URL — or the question and its options.
        match pending.kind {
            drover_core::providers::RequestKind::Permission => push(
                "",
                format!(
                    "  wants: {}",
                    clip(&one_line(&pending.ask.summary()), TEXT_CHARS)
                ),
            ),
            drover_core::providers::RequestKind::Question => {
                for q in pending.ask.questions() {
                    push(
                        "",
                        format!("  question: {}", clip(&one_line(&q.question), TEXT_CHARS)),
                    );
                    for (i, option) in q.options.iter().enumerate() {
                        let about = option
                            .description
                            .as_deref()
                            .map(|d| format!(" — {}", one_line(d)))
                            .unwrap_or_default();
                        let option =
                            clip(&one_line(&format!("{}{about}", option.label)), TEXT_CHARS);
                        push("", format!("    {}. {option}", i + 1));
                    }
                }
            }
        }
        if let Some(reason) = &pending.guard {
            push(
                "",
                format!("flagged: {}", clip(&one_line(reason), TEXT_CHARS)),
            );
        }
    }
    // The last decisions, with who made them (`user`, `rule:<id>`, `always`, …).
    let skip = run.decisions.len().saturating_sub(DECISIONS_SHOWN_TEXT);
    for d in run.decisions.iter().skip(skip) {
        push(
            "decided",
            clip(
                &one_line(&format!(
                    "{} {}: {}",
                    d.request_id.as_deref().unwrap_or("-"),
                    d.who,
                    d.decision
                )),
                TEXT_CHARS,
            ),
        );
    }
    if let Some(result) = &run.last_result {
        lines.extend(result_lines(result));
    }
    if let Some(evidence) = &run.evidence {
        lines.push(("evidence".into(), evidence.words().to_string()));
    }
    for note in &run.notes {
        lines.push(("note".into(), clip(&one_line(&note.text), TEXT_CHARS)));
    }
    let mut when = format!("created {} ago", age(now, run.head.created_at));
    if let Some(finished) = run.head.finished_at {
        when.push_str(&format!(" · finished {} ago", age(now, finished)));
    }
    lines.push(("when".into(), when));
    let rows: Vec<Vec<String>> = lines.into_iter().map(|(k, v)| vec![k, v]).collect();
    table(&rows)
}

/// `drover transcript`: the lines, the events or the result.
pub fn transcript(view: &TranscriptView) -> String {
    let mut out = String::new();
    match view.format {
        TranscriptFormat::Tail | TranscriptFormat::Text => {
            for line in &view.lines {
                out.push_str(&one_line(line));
                out.push('\n');
            }
        }
        TranscriptFormat::Events => {
            let rows: Vec<Vec<String>> = view
                .events
                .iter()
                .map(|e| vec![e.seq.to_string(), e.kind.clone(), e.body.to_string()])
                .collect();
            out = table(&rows);
        }
        TranscriptFormat::Result => match &view.result {
            Some(result) => {
                let rows: Vec<Vec<String>> = result_lines(result)
                    .into_iter()
                    .map(|(k, v)| vec![k, v])
                    .collect();
                out = table(&rows);
            }
            None => out.push_str("no result yet\n"),
        },
    }
    out
}

/// `drover wait`: the runs as they are now.
pub fn wait_outcome(outcome: &WaitOutcome, now: UnixMillis) -> String {
    runs_table(&outcome.runs, now)
}

fn kind_words(kind: RequestKind) -> &'static str {
    match kind {
        RequestKind::Permission => "permission for",
        RequestKind::Question => "question from",
    }
}

/// One event of the run a foreground `drover dispatch` follows (its id is already on
/// screen, so it is not repeated).
pub fn event_line(event: &DispatchEvent) -> String {
    let (tag, text) = match event {
        DispatchEvent::RunChanged { run } => ("state", {
            let mut text = state_cell(run);
            text.push_str(&format!("  {} spent", usd(run.head.cost_usd)));
            text
        }),
        DispatchEvent::LiveState { live_state, .. } => ("live", live_line(live_state)),
        DispatchEvent::Transcript { line, .. } => ("|", one_line(line)),
        DispatchEvent::Budget { note, .. } => ("budget", one_line(note)),
        DispatchEvent::Health {
            ledger_unavailable: Some(why),
            ..
        } => ("ledger", format!("cannot write: {}", one_line(why))),
        DispatchEvent::Health { config_refused, .. } => (
            "config",
            config_refused.as_deref().map_or_else(
                || "healthy: the config is read, the ledger writes".to_string(),
                one_line,
            ),
        ),
        DispatchEvent::PermissionRequested { run_id, pending } => (
            "asks",
            format!(
                "{} {} (request {}): drover respond {run_id} {} {}",
                kind_words(pending.kind),
                one_line(&pending.tool),
                pending.request_id,
                pending.request_id,
                answer_hint(pending)
            ),
        ),
        DispatchEvent::PermissionResolved {
            request_id, how, ..
        } => ("answered", format!("{request_id}: {}", one_line(how))),
        DispatchEvent::Note { note, .. } => ("note", one_line(&note.text)),
        DispatchEvent::RunRemoved { .. } => ("removed", "from the trays".to_string()),
    };
    format!("{tag:<8}  {text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::dispatch::api::{NoteView, PendingView};
    use drover_core::live_state::{Cause, LiveStateKind};
    use drover_core::providers::Ask;
    use drover_core::run_state::RunState;

    fn summary(run_id: &str, state: RunState, title: &str) -> RunSummary {
        let mut run = RunSummary::example(run_id, state);
        run.head.model = Some("sim-standard".into());
        run.head.title = title.into();
        run.head.cost_usd = 0.25;
        run.head.created_at = 0;
        run
    }

    #[test]
    fn a_reason_that_says_the_state_again_is_left_out() {
        assert_eq!(
            state_with_reason(RunState::Interrupted, Some("interrupted")),
            "interrupted"
        );
        assert_eq!(
            state_with_reason(RunState::Failed, Some("provider_error")),
            "failed (provider_error)"
        );
        assert_eq!(state_with_reason(RunState::Running, None), "running");
        let mut left = summary("r-4", RunState::Interrupted, "t");
        left.head.completion_reason = Some("interrupted".into());
        let table = runs_table(&[left], 0);
        assert!(!table.contains("interrupted (interrupted)"), "{table}");
    }

    #[test]
    fn ages_are_short() {
        let cases = [
            (0, "0s"),
            (59_999, "59s"),
            (60_000, "1m"),
            (3_599_000, "59m"),
            (3_600_000, "1h"),
            (86_400_000, "1d"),
            (-5_000, "0s"),
        ];
        for (elapsed, expected) in cases {
            assert_eq!(age(elapsed, 0), expected, "{elapsed}");
        }
    }

    #[test]
    fn the_runs_table_is_aligned_and_flags_what_needs_attention() {
        let mut waiting = summary("r-22", RunState::AwaitingPermission, "ask\x1b[31m me");
        waiting.pending = 2;
        let mut done = summary("r-1", RunState::Completed, "done");
        done.head.completion_reason = Some("complete".into());
        done.head.model = None;
        let text = runs_table(&[waiting, done], 90_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "RUN   STATE                            SPENT           AGE  PROVIDER          TITLE",
                "r-22  awaiting_permission · 2 pending  $0.25 of $5.00  1m   sim/sim-standard  ask [31m me",
                "r-1   completed (complete)             $0.25 of $5.00  1m   sim               done",
            ]
        );
        assert_eq!(runs_table(&[], 0), "no runs\n");
        let mut left = summary("r-3", RunState::Running, "left");
        left.head.owner_gone = true;
        assert!(
            runs_table(&[left], 0).contains("running · owner gone"),
            "a run a crash left says so"
        );
    }

    #[test]
    fn event_lines_are_short_and_say_what_to_do() {
        let pending = PendingView {
            request_id: "q1".into(),
            kind: RequestKind::Permission,
            tool: "Bash".into(),
            ask: Ask::command("ls", None, None),
            always: None,
            created_at: 0,
            expires_at: 1,
            guard: None,
        };
        let mut changed = summary("r1", RunState::Failed, "t");
        changed.head.completion_reason = Some("provider_error".into());
        let cases = [
            (
                DispatchEvent::RunChanged { run: changed },
                "state     failed (provider_error)  $0.25 spent",
            ),
            (
                DispatchEvent::LiveState {
                    run_id: "r1".into(),
                    live_state: LiveState {
                        state: LiveStateKind::Working,
                        since: 0,
                        bound: Some(1),
                        detail: Some("running a tool".into()),
                        cause: None,
                        seq: 2,
                    },
                },
                "live      working: running a tool",
            ),
            (
                DispatchEvent::LiveState {
                    run_id: "r1".into(),
                    live_state: LiveState {
                        state: LiveStateKind::Ended,
                        since: 0,
                        bound: None,
                        detail: None,
                        cause: Some(Cause::Completed),
                        seq: 3,
                    },
                },
                "live      ended (completed)",
            ),
            (
                DispatchEvent::Transcript {
                    run_id: "r1".into(),
                    line: "tool\nRead\r".into(),
                    seq: 4,
                },
                "|         tool Read",
            ),
            (
                DispatchEvent::PermissionRequested {
                    run_id: "r1".into(),
                    pending,
                },
                "asks      permission for Bash (request q1): drover respond r1 q1 allow|always|deny",
            ),
            (
                DispatchEvent::PermissionResolved {
                    run_id: "r1".into(),
                    request_id: "q1".into(),
                    how: "allow".into(),
                },
                "answered  q1: allow",
            ),
            (
                DispatchEvent::Note {
                    run_id: "r1".into(),
                    note: NoteView {
                        at: 0,
                        text: "budget lowered".into(),
                    },
                },
                "note      budget lowered",
            ),
            (
                DispatchEvent::RunRemoved {
                    run_id: "r1".into(),
                },
                "removed   from the trays",
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(event_line(&event), expected);
        }
    }

    #[test]
    fn show_lists_turns_aligned_and_says_how_to_answer_what_is_pending() {
        let turn = |number: u32, origin: &str| drover_core::dispatch::api::TurnView {
            number,
            origin: origin.into(),
            started_at: 0,
            ended_at: None,
            prompt_preview: format!("prompt {number}"),
            text: None,
            tokens: Default::default(),
            cost_usd: Some(0.5),
            result: None,
            commands: Vec::new(),
        };
        let view = RunView {
            head: drover_core::dispatch::api::RunHead {
                run_id: "R-7".into(),
                state: RunState::AwaitingPermission,
                completion_reason: None,
                provider: "sim".into(),
                model: None,
                title: "Title".into(),
                live_state: None,
                cost_usd: 1.0,
                budget_usd: 5.0,
                stalled: true,
                created_at: 0,
                finished_at: None,
                owner_gone: false,
                rev: 0,
                host: None,
            },
            task: "do\nit".into(),
            cwd: "/w".into(),
            policy: "ask".into(),
            sandbox: false,
            cost_basis: "reported".into(),
            tokens: Default::default(),
            turns: vec![turn(1, "dispatch"), turn(2, "follow_up")],
            pending: vec![
                PendingView {
                    request_id: "Q-1".into(),
                    kind: RequestKind::Question,
                    tool: "AskUser".into(),
                    ask: Ask::Question {
                        questions: vec![drover_core::providers::Question {
                            question: "Which db?".into(),
                            header: None,
                            options: vec![
                                drover_core::providers::QuestionOption {
                                    label: "SQLite".into(),
                                    description: Some("a file".into()),
                                },
                                drover_core::providers::QuestionOption {
                                    label: "Postgres".into(),
                                    description: None,
                                },
                            ],
                            multi_select: false,
                        }],
                    },
                    always: None,
                    created_at: 0,
                    expires_at: 1,
                    guard: None,
                },
                PendingView {
                    request_id: "P-2".into(),
                    kind: RequestKind::Permission,
                    tool: "Bash".into(),
                    ask: Ask::command("cargo test --workspace", None, None),
                    always: None,
                    created_at: 0,
                    expires_at: 1,
                    guard: None,
                },
            ],
            last_result: None,
            notes: vec![],
            provider_session_id: None,
            max_turns: 6,
            queued_follow_ups: 1,
            pid: None,
            budget: drover_core::dispatch::api::RunBudget {
                cap: 5.0,
                spent: 1.0,
                remaining: 4.0,
                clamped_from: None,
            },
            usage: Vec::new(),
            route: None,
            escalation: None,
            depth: 0,
            parent_run: None,
            workspace: None,
            decisions: vec![drover_core::dispatch::api::DecisionView {
                at: 0,
                request_id: Some("P-1".into()),
                who: "rule:3".into(),
                decision: "allow by rule 3 (`cargo test *`, everywhere)".into(),
            }],
            needs_you: None,
            evidence: None,
            script_approval: None,
            conflict_offer: None,
        };
        let text = run_view(&view, 120_000);
        let lines: Vec<&str> = text.lines().collect();
        let expected = [
            "run       R-7  Title",
            "state     awaiting_permission · stalled: no provider event for a while",
            "provider  sim",
            "task      do it",
            "cwd       /w",
            "policy    ask",
            "spent     $1.00 of $5.00 (reported)",
            "tokens    0 in · 0 out · 0 reasoning · 0 cache read · 0 cache write",
            "turns     2 of at most 6 · 1 follow-up queued",
            "          1  dispatch   $0.50  prompt 1",
            "          2  follow_up  $0.50  prompt 2",
            "pending   Q-1 question from AskUser: drover respond R-7 Q-1 allow --answer \"Which db?=CHOICE\" (or deny)",
            "            question: Which db?",
            "              1. SQLite — a file",
            "              2. Postgres",
            "pending   P-2 permission for Bash: drover respond R-7 P-2 allow|always|deny",
            "            wants: cargo test --workspace",
            "decided   P-1 rule:3: allow by rule 3 (`cargo test *`, everywhere)",
            "when      created 2m ago",
        ];
        assert_eq!(lines, expected);
    }
}
