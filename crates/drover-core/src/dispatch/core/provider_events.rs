//! What the dispatcher does with each adapter event: the run's live state, its turns,
//! its result, its pending requests, and its end when the child goes away.
//!
//! What must stay true: every provider event is written to the ledger in the order it
//! arrived (kind `transcript`, with its one-line summary); an event for a run that is
//! ending, or that a stopping drover leaves for the next owner, only matters if it is the
//! child's exit; the exit of a hibernating child, of
//! one whose failed turn is held, or of a host run's dropped connection
//! (`host_drop.rs`), does not end the run; a queued follow-up sent as a turn
//! is marked sent in the ledger (`follow_up_sent`), so a restart never sends it twice.

use serde_json::json;

use super::lifecycle::TOOL_BOUND_MS;
use super::run::{Batch, TURN_TEXT_MAX_CHARS, TurnOrigin};
use super::transcript::summarize;
use super::{Core, causes, prompts};
use crate::dispatch::api::{DispatchEvent, ResultView};
use crate::ledger::{RunPatch, WriteOp};
use crate::live_state::{Cause, LiveStateKind};
use crate::providers::{ProviderEvent, RunProviderEvent, TurnEnd};
use crate::result_contract::{ResultStatus, parse_json_result, parse_result};
use crate::run_state::RunState;

/// The ledger body of a provider event: its transcript line and the event itself. The
/// agent's text has no line there (`null`, as an event with no line): its line, with the
/// text's line breaks, is made from the event's text when the transcript is read
/// (`projections::transcript_from_ledger`), so the text is not stored twice.
#[derive(serde::Serialize)]
pub(super) struct TranscriptBody<'a> {
    pub(super) line: Option<&'a str>,
    pub(super) event: &'a ProviderEvent,
}

/// How long a rate-limited turn is expected to wait when the provider gives no hint.
const RATE_LIMIT_DEFAULT_MS: i64 = 60_000;
/// File-changing tool calls tracked per turn (a turn of parallel tools has a few).
const FILE_TOOLS_MAX: usize = 256;

impl Core {
    pub(super) fn on_provider_event(&mut self, tagged: RunProviderEvent) {
        let RunProviderEvent { run_id, mut event } = tagged;
        let run_id: &str = &run_id;
        // Nothing a provider said is stored or shown before its secrets are redacted
        // (what answering needs stays with the adapter): here, once, its text fields
        // only; its transcript entry below is made of them and goes to the ledger as it is
        // (docs/ARCHITECTURE.md §"Secrets").
        event.redact(&self.redactor);
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        let line = summarize(&event);
        // A tool call's line is indexed for search by the writer, with its event.
        run.append(
            &mut batch,
            crate::dispatch::projections::TRANSCRIPT_EVENT,
            &TranscriptBody {
                line: line
                    .as_deref()
                    .filter(|_| !matches!(event, ProviderEvent::AssistantText { .. })),
                event: &event,
            },
            now,
            matches!(event, ProviderEvent::ToolStarted { .. }),
        );
        if let Some(line) = line {
            let seq = run.next_seq - 1;
            run.transcript.push(line.clone(), seq);
            batch.events.push(DispatchEvent::Transcript {
                run_id: run_id.to_string(),
                line,
                seq,
            });
        }
        run.last_event_at = now;
        let exited = matches!(event, ProviderEvent::Exited { .. });
        if let ProviderEvent::Notice { text } = &event
            && !run.ready
        {
            run.launch_notice = Some(crate::text::clip(text, 400));
        }
        if run.stalled && !exited && run.ending.is_none() {
            run.stalled = false;
            run.note(&mut batch, "the provider is active again", now);
            run.touch(&mut batch);
        }
        if let ProviderEvent::Exited {
            code,
            signal,
            stderr_tail,
        } = &event
        {
            let note = causes::exit_note(
                run.ready,
                run.launch_notice.as_deref(),
                *code,
                *signal,
                stderr_tail,
            );
            let (code, signal) = (*code, *signal);
            self.commit(batch);
            return self.on_exited(run_id, note, code, signal);
        }
        // Ending, or left as it is for the next owner by a stopping drover (what its CLI
        // says as it goes — a withdrawn request, a turn cut short — changes nothing).
        if run.ending.is_some() || self.shutdown_deadline.is_some() {
            self.commit(batch);
            return;
        }
        // Any sign of life after a rate limit means the provider answers again.
        if run.rate_limited
            && !matches!(
                event,
                ProviderEvent::RateLimited { .. } | ProviderEvent::Notice { .. }
            )
        {
            run.rate_limited = false;
            run.model_turn(&mut batch, now);
        }
        match event {
            ProviderEvent::Ready { .. } => {
                run.ready = true;
                if let Some((prompt, origin)) = run.wake.take() {
                    run.warming = false;
                    self.commit(batch);
                    return self.start_turn(run_id, prompt, origin);
                }
                if run.warming {
                    self.commit(batch);
                    return self.on_warm(run_id);
                }
                self.commit(batch);
                let prompt = self
                    .runs
                    .get_mut(run_id)
                    .map(|r| {
                        r.first_prompt
                            .take()
                            .unwrap_or_else(|| prompts::first_turn(&r.spec))
                    })
                    .unwrap_or_default();
                return self.start_turn(run_id, prompt, TurnOrigin::Dispatch);
            }
            ProviderEvent::Session { session_id, model } => {
                run.provider_session_id = Some(session_id.clone());
                if model.is_some() && model != run.model {
                    run.model = model.clone();
                    run.price = None;
                }
                batch.ops.push(WriteOp::UpdateRun {
                    run_id: run_id.to_string(),
                    patch: Box::new(RunPatch {
                        updated_at: now,
                        provider_session_id: Some(session_id),
                        model,
                        ..RunPatch::default()
                    }),
                });
                run.touch(&mut batch);
            }
            ProviderEvent::SessionNotResumable { reason } => {
                // Kept warm: a hibernated run could not be woken in its session.
                run.not_resumable = true;
                run.note(&mut batch, reason, now);
            }
            ProviderEvent::AssistantText { text } => {
                // Bytes bound chars from above: once the text holds the cap in bytes, it
                // is cut to the cap in chars (once) and nothing more is appended. No
                // per-event count over the whole text.
                if let Some(turn) = run.turns.last_mut()
                    && turn.text.len() < TURN_TEXT_MAX_CHARS
                {
                    if !turn.text.is_empty() {
                        turn.text.push('\n');
                    }
                    turn.text.push_str(&text);
                    if turn.text.len() >= TURN_TEXT_MAX_CHARS {
                        turn.text = crate::text::clip(&turn.text, TURN_TEXT_MAX_CHARS);
                    }
                }
            }
            ProviderEvent::ToolStarted {
                name,
                tool_use_id,
                ask,
            } => {
                // An edit or a command may change files: its end is worth a look.
                if matches!(
                    ask,
                    crate::providers::Ask::FileEdit { .. } | crate::providers::Ask::Command { .. }
                ) && run.file_tools.len() < FILE_TOOLS_MAX
                {
                    run.file_tools.insert(tool_use_id.clone());
                }
                // A command's end, with its exit code, is evidence (docs/ARCHITECTURE.md
                // §"Evidence").
                if let crate::providers::Ask::Command { command, .. } = &ask
                    && run.commands_open.len() < FILE_TOOLS_MAX
                {
                    run.commands_open.insert(tool_use_id, command.clone());
                }
                run.tool_open = true;
                let bound = (now + TOOL_BOUND_MS).min(run.deadline);
                run.working(&mut batch, bound, &format!("running a tool: {name}"), now);
            }
            ProviderEvent::ToolFinished {
                tool_use_id,
                is_error,
                exit_code,
                ..
            } => {
                // A command refused, or cut before it exited, reports no exit code with
                // its error: it did not run to an end, and is not evidence.
                if let Some(command) = run.commands_open.remove(&tool_use_id)
                    && (exit_code.is_some() || !is_error)
                    && let Some(turn) = run.turns.last_mut()
                    && turn.commands.len() < crate::evidence::COMMANDS_PER_TURN_MAX
                {
                    turn.commands.push(crate::evidence::CommandRun {
                        test: self.tests.test_of(&command),
                        command: crate::text::clip(
                            &crate::text::one_line(&command),
                            crate::evidence::COMMAND_MAX_CHARS,
                        ),
                        exit_code: exit_code.or((!is_error).then_some(0)),
                    });
                }
                run.tool_open = false;
                run.model_turn(&mut batch, now);
                if run.file_tools.remove(&tool_use_id) {
                    self.commit(batch);
                    return self.measure(run_id);
                }
            }
            ProviderEvent::PermissionRequested(request) => {
                self.commit(batch);
                return self.on_permission_request(run_id, request);
            }
            ProviderEvent::PermissionWithdrawn { request_id } => {
                if run.broker.withdraw(&request_id).is_some() {
                    run.record_resolution(
                        &mut batch,
                        request_id,
                        "provider",
                        "withdrawn by the provider",
                        json!({}),
                        now,
                    );
                    if run.broker.is_empty() && run.state() == RunState::AwaitingPermission {
                        run.set_state(&mut batch, RunState::Running, None, now);
                        run.model_turn(&mut batch, now);
                    } else {
                        run.touch(&mut batch);
                    }
                }
            }
            ProviderEvent::Usage { tokens, model } => {
                if let Some(turn) = run.turns.last_mut() {
                    turn.tokens.add(&tokens);
                }
                self.commit(batch);
                return self.on_streamed_usage(run_id, model.as_deref(), &tokens);
            }
            ProviderEvent::RateLimited { until, detail } => {
                run.rate_limited = true;
                let bound = until
                    .filter(|u| *u > now)
                    .unwrap_or(now + RATE_LIMIT_DEFAULT_MS);
                run.set_live(
                    &mut batch,
                    LiveStateKind::WaitingProvider,
                    Some(bound),
                    Some(&detail),
                    None,
                    now,
                );
            }
            ProviderEvent::RateLimitCleared
            | ProviderEvent::Thinking { .. }
            | ProviderEvent::Notice { .. } => {}
            ProviderEvent::TurnCompleted(end) => {
                run.tool_open = false;
                run.file_tools.clear();
                run.commands_open.clear();
                self.commit(batch);
                self.measure(run_id);
                self.on_turn_completed(run_id, end);
                // A run with an open pull request, idle now: the turn's work goes to it.
                return self.push_to_open_pr(run_id);
            }
            ProviderEvent::Exited { .. } => {}
        }
        self.commit(batch);
    }

    fn on_turn_completed(&mut self, run_id: &str, end: TurnEnd) {
        let now = self.now;
        let mut batch = Batch::default();
        // Money: the turn's reported cost replaces the estimate streamed during it.
        let charge = self.book_turn(run_id, &end, &mut batch);
        self.commit(std::mem::take(&mut batch));
        // The caps, now that the turn's real cost is booked (this may stop the run).
        self.check_money(run_id);
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.turn_in_flight = false;
        let Some(turn) = run.turns.last_mut() else {
            self.commit(batch);
            return;
        };
        if end.tokens != Default::default() {
            turn.tokens = end.tokens;
        }
        // The agent's text as the turn's events brought it, for the search index; the
        // turn's text is the provider's own answer when it gives one.
        let agent_text = match end.text.as_ref().filter(|t| !t.trim().is_empty()) {
            Some(text) => {
                std::mem::replace(&mut turn.text, crate::text::clip(text, TURN_TEXT_MAX_CHARS))
            }
            None => turn.text.clone(),
        };
        turn.ended_at = Some(now);
        turn.cost_usd = charge;
        let origin = turn.origin;
        let text = turn.text.clone();
        let tokens = turn.tokens;
        run.tokens.add(&tokens);

        if end.is_error {
            let why = causes::turn_error_note(&end);
            if let Some(turn) = run.turns.last() {
                batch.ops.push(turn.end_record(run_id, Some(agent_text)));
            }
            run.note(&mut batch, why, now);
            // A failure that may pass (rate limit, overload, 5xx after the provider's own
            // retries) is told apart: the turn is held and sent again, a few times, and
            // then a retry is offered.
            if end.transient && run.ending.is_none() && self.hold_for_resend(run_id, &mut batch) {
                return self.commit(batch);
            }
            let Some(run) = self.runs.get_mut(run_id) else {
                return;
            };
            let reason = if end.transient {
                run.note(
                    &mut batch,
                    "this failure may pass: retry the run later",
                    now,
                );
                "provider_unavailable"
            } else {
                "provider_error"
            };
            self.commit(batch);
            return self.end_run(run_id, RunState::Failed, reason, Cause::Failed);
        }

        // The result: JSON for schema runs, the `## Result` block otherwise.
        let mut retry = false;
        let mut done = false;
        if run.spec.output_schema.is_some() {
            let json = end
                .structured_output
                .clone()
                .or_else(|| parse_json_result(&text));
            if let Some(turn) = run.turns.last_mut() {
                turn.result = json.clone();
            }
            done = json.is_some();
            match json {
                Some(value) => {
                    run.last_result = Some(ResultView {
                        status: Some("done".into()),
                        summary: None,
                        question: None,
                        files: vec![],
                        changes: vec![],
                        follow_ups: vec![],
                        json: Some(value),
                    });
                }
                None => run.note(
                    &mut batch,
                    "the answer was not valid JSON for the output schema",
                    now,
                ),
            }
        } else {
            let block = parse_result(&text);
            if let Some(turn) = run.turns.last_mut() {
                turn.result = serde_json::to_value(&block).ok().filter(|_| block.found);
            }
            if block.found {
                done = block.status == Some(ResultStatus::Done);
                run.needs_input = block.status == Some(ResultStatus::NeedsInput);
                if block.status == Some(ResultStatus::Blocked) {
                    run.note(&mut batch, "the run reports it is blocked", now);
                }
                run.last_result = Some(block.into());
                batch.ops.push(WriteOp::UpdateRun {
                    run_id: run_id.to_string(),
                    patch: Box::new(RunPatch {
                        updated_at: now,
                        result: serde_json::to_value(&run.last_result).ok(),
                        ..RunPatch::default()
                    }),
                });
            } else if origin == TurnOrigin::WrapUp {
                // No retry after the wrap-up: `wrapped_up` ends the run as its limit
                // would have, and says so.
            } else if origin != TurnOrigin::ResultRetry {
                retry = true;
                run.note(
                    &mut batch,
                    "no ## Result block; asking once more for it",
                    now,
                );
            } else {
                run.note(
                    &mut batch,
                    "no ## Result block after the retry; the run gave no usable result",
                    now,
                );
            }
        }
        run.resends = 0;
        if let Some(turn) = run.turns.last() {
            batch.ops.push(turn.end_record(run_id, Some(agent_text)));
        }
        if run.ending.is_some() {
            // Stopped for money while the turn ended: nothing more is sent.
            self.commit(batch);
            return;
        }
        if origin == TurnOrigin::WrapUp {
            self.commit(batch);
            return self.wrapped_up(run_id);
        }
        self.commit(batch);
        // A wrap-up due (asked, near the cap, or at the last allowed turn) goes before
        // anything else; it asks for the result block itself.
        if self.wrap_up_at_turn_end(run_id, done) {
            return;
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let mut batch = Batch::default();
        if retry {
            self.commit(batch);
            return self.start_turn(run_id, prompts::result_retry(), TurnOrigin::ResultRetry);
        }
        if let Some(next) = run.take_follow_up(&mut batch, now) {
            self.commit(batch);
            return self.start_turn(run_id, next, TurnOrigin::FollowUp);
        }
        if run.user_turns() >= run.spec.max_turns {
            run.note(
                &mut batch,
                format!(
                    "reached its limit of {} turn{}",
                    run.spec.max_turns,
                    crate::text::plural(run.spec.max_turns as usize)
                ),
                now,
            );
            self.commit(batch);
            return self.end_run(run_id, RunState::Completed, "max_turns", Cause::Completed);
        }
        run.set_state(&mut batch, RunState::Idle, None, now);
        let idle_until = now.saturating_add(super::answers::secs_ms(run.spec.idle_timeout_secs));
        let detail = if run.needs_input {
            "needs your input: answer with a follow-up"
        } else {
            super::run::IDLE_DETAIL
        };
        run.working(&mut batch, idle_until, detail, now);
        self.commit(batch);
        // Idle, its slot can go to a run waiting for one (it hibernates for it).
        self.make_room();
        // A turn that ended blocked is offered an escalation while the run is warm.
        self.offer_on_turn_end(run_id);
        // Its turn is over: a shared run waiting for its directory may go.
        self.release_dir_waiters();
        self.check_waiters();
    }

    /// The child is gone; `note` says how, for a run that was not ending anyway.
    fn on_exited(&mut self, run_id: &str, note: String, code: Option<i32>, signal: Option<i32>) {
        // Cut short in a turn (or in what a turn asked): as a restart decides it.
        let turn_cut = self.runs.get(run_id).is_some_and(|r| {
            r.turn_in_flight
                || matches!(
                    r.state(),
                    RunState::Starting | RunState::Running | RunState::AwaitingPermission
                )
        });
        self.book_unfinished_turn(run_id);
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        // Shut down by a stopping drover, the run left as it is for the next owner.
        if self.shutting_down() && run.ending.is_none() {
            return self.on_parked_exit(run_id);
        }
        if run.hibernating && run.ending.is_none() {
            return self.on_hibernated(run_id);
        }
        if run.warming && !run.ready && run.ending.is_none() {
            return self.warm_failed(run_id, note);
        }
        if run.resend_at.is_some() && run.ending.is_none() {
            return self.on_exited_while_held(run_id, note);
        }
        // A run on a host whose connection dropped waits for its host (`host_drop.rs`).
        if run.ending.is_none() && self.host_dropped(run_id, code, signal, turn_cut, &note) {
            return;
        }
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let (state, reason, cause) = match &run.ending {
            Some(e) => (e.state, e.reason.clone(), e.cause),
            // It never got through its handshake: the launch failed.
            None if !run.ready => (RunState::Failed, "launch_error".to_string(), Cause::Failed),
            None => (
                RunState::Failed,
                "provider_error".to_string(),
                Cause::RunnerGone,
            ),
        };
        if run.ending.is_none() {
            self.note_run(run_id, note);
        }
        self.finalize(run_id, state, &reason, cause);
    }

    /// A turn cut short (the child died or was stopped mid-turn) never reported its cost:
    /// its streamed tokens are booked (estimated from the catalog, or unpriced — never $0).
    fn book_unfinished_turn(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if !run.turn_in_flight {
            return;
        }
        run.turn_in_flight = false;
        let Some(turn) = run.turns.last_mut().filter(|t| t.ended_at.is_none()) else {
            return;
        };
        turn.ended_at = Some(now);
        let tokens = turn.tokens;
        let number = turn.number;
        let record = turn.end_record(run_id, Some(turn.text.clone()));
        let mut batch = Batch::default();
        batch.ops.push(record);
        if tokens != Default::default() {
            run.tokens.add(&tokens);
            self.book_cut_turn(run_id, tokens, number, &mut batch);
        }
        self.commit(batch);
    }
}
