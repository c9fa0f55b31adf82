//! Take-over (docs/ARCHITECTURE.md §"Take-over"): an idle run is handed to the user in its
//! CLI's own interactive interface, and taken back.
//!
//! `take_over` shuts the run's warm child down the way hibernation does (its provider
//! session kept) and marks the run taken over; once no child is left, the command that
//! opens the CLI's interface on the session is made off the core
//! ([`Effect::Interactive`]) and is the answer. `hand_back` has the CLI's own record of
//! the session read off the core for what happened since the take-over; the turns found
//! are recorded as `interactive` turns with their usage booked, the worktree's change is
//! worked out again, and the run is idle and hibernated under drover, its next follow-up
//! in the same session.
//!
//! What must stay true: drover sends a taken-over run nothing (follow-ups, wakes and
//! resumes are refused with `RUN_TAKEN_OVER`; no timer hibernates it or ends it for
//! being idle) and starts no child for it, so two processes never share its session; it
//! keeps its rail slot meanwhile; the answer to a take-over comes only once its child
//! has exited.

use super::run::{Batch, HIBERNATED_DETAIL, Turn, TurnOrigin};
use super::{Core, Effect, ReplyTo};
use crate::dispatch::api::Response;
use crate::providers::interactive::{InteractivePlan, InteractiveTurn};
use crate::providers::{ModelUsage, TurnEnd};
use crate::{DroverError, ErrorCode, UnixMillis};

/// A run in its CLI's own interface.
#[derive(Debug, Clone, PartialEq)]
pub struct TakenOver {
    /// When the take-over began: what the session records from then on is the user's.
    pub since: UnixMillis,
    /// Who waits for the command, until it is sent.
    pub reply: Option<ReplyTo>,
    /// The session's record is being read for a hand-back.
    pub reading: bool,
}

/// Off-core work of a take-over.
#[derive(Debug, Clone)]
pub struct InteractiveJob {
    /// The run taken over.
    pub run_id: String,
    /// Who waits for the outcome.
    pub reply: ReplyTo,
    /// The run's launch spec (its command, environment and directory as its child would
    /// get them), on its provider session.
    pub spec: Box<crate::providers::LaunchSpec>,
    /// The provider session.
    pub session: String,
    /// Make the command (`None`), or read the record from this time on.
    pub read_since: Option<UnixMillis>,
}

/// What an [`Effect::Interactive`] came to.
#[derive(Debug, Clone)]
pub struct InteractiveDone {
    /// The run taken over.
    pub run_id: String,
    /// Who waits for the outcome.
    pub reply: ReplyTo,
    /// The command, or the turns read; or why not.
    pub outcome: Result<Interactively, String>,
}

/// The outcome of an [`InteractiveJob`].
#[derive(Debug, Clone)]
pub enum Interactively {
    /// The command that opens the interface.
    Planned(Box<InteractivePlan>),
    /// The turns the session recorded since the take-over.
    Read(Vec<InteractiveTurn>),
}

/// The live line's detail of a taken-over run.
fn taken_detail(provider: &str) -> String {
    format!(
        "taken over · in {}'s own interface",
        crate::providers::registry::cli_name(provider)
    )
}

impl Core {
    /// Why drover may not send run `run_id` anything now: it is taken over.
    pub(super) fn taken_over_refusal(&self, run_id: &str) -> Option<DroverError> {
        let run = self.runs.get(run_id)?;
        run.taken_over.as_ref()?;
        Some(DroverError::new(
            ErrorCode::RunTakenOver,
            format!(
                "run {run_id} is taken over in its CLI's own interface; leave that interface \
                 (or run `drover attach {run_id} --hand-back`) to hand it back, then try again"
            ),
        ))
    }

    /// `take_over`: checks the run can be handed to the user, then shuts its child down.
    pub(super) fn take_over(&mut self, to: ReplyTo, run_id: &str) {
        let now = self.now;
        if let Some(refusal) = self.taken_over_refusal(run_id) {
            return self.reply_now(to, Err(refusal));
        }
        let Some(run) = self.runs.get(run_id) else {
            return self.reply_now(to, Err(super::not_found(run_id)));
        };
        let supported =
            crate::providers::traits(&run.spec.provider).is_some_and(|t| t.interactive.is_some());
        let refusal = if !supported {
            Some(DroverError::new(
                ErrorCode::TakeOverUnsupported,
                format!(
                    "drover cannot open a {} run in its CLI's own interface; send it a \
                     follow-up instead",
                    run.spec.provider
                ),
            ))
        } else if run.provider_session_id.is_none() {
            Some(DroverError::new(
                ErrorCode::TakeOverUnsupported,
                format!(
                    "run {run_id} has no provider session yet; take it over once its first \
                     turn has started"
                ),
            ))
        } else if run.state() != crate::run_state::RunState::Idle
            || run.turn_in_flight
            || !run.broker.is_empty()
            || !run.follow_ups.is_empty()
            || run.wake.is_some()
            || run.launching
            || run.warming
        {
            Some(DroverError::new(
                ErrorCode::RunNotIdle,
                format!(
                    "run {run_id} is {}, not idle; take it over once its turn has ended (or \
                     stop it)",
                    run.state().as_str()
                ),
            ))
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return self.reply_now(to, Err(refusal));
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let provider = crate::providers::registry::cli_name(&run.spec.provider).to_string();
        run.taken_over = Some(TakenOver {
            since: now,
            reply: Some(to),
            reading: false,
        });
        let mut batch = Batch::default();
        run.note(
            &mut batch,
            format!("taken over in {provider}'s own interface"),
            now,
        );
        let deadline = run.deadline;
        run.working(&mut batch, deadline, &taken_detail(&run.spec.provider), now);
        run.touch(&mut batch);
        let warm = run.child.is_some();
        self.commit(batch);
        if warm {
            // Its child shuts down as for hibernation; the command follows once it has.
            if let Some(run) = self.runs.get_mut(run_id) {
                run.hibernating = true;
            }
            self.send(run_id, crate::providers::ProviderCommand::Shutdown);
        } else {
            self.plan_take_over(run_id);
        }
    }

    /// The taken-over run has no child left: the command is made, once.
    pub(super) fn plan_take_over(&mut self, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(reply) = run.taken_over.as_mut().and_then(|t| t.reply.take()) else {
            return;
        };
        let Some(session) = run.provider_session_id.clone() else {
            return;
        };
        self.interactive_job(run_id, reply, session, None);
    }

    fn interactive_job(
        &mut self,
        run_id: &str,
        reply: ReplyTo,
        session: String,
        read_since: Option<UnixMillis>,
    ) {
        let Some(mut spec) = self.launch_spec(run_id) else {
            return;
        };
        spec.resume_session = Some(session.clone());
        self.out.push(Effect::Interactive(Box::new(InteractiveJob {
            run_id: run_id.to_string(),
            reply,
            spec: Box::new(spec),
            session,
            read_since,
        })));
    }

    /// `hand_back`: the session's record is read for what the user did.
    pub(super) fn hand_back(&mut self, to: ReplyTo, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return self.reply_now(to, Err(super::not_found(run_id)));
        };
        let Some(taken) = run.taken_over.as_mut() else {
            let e = DroverError::new(
                ErrorCode::RunNotTakenOver,
                format!("run {run_id} is not taken over; nothing to hand back"),
            );
            return self.reply_now(to, Err(e));
        };
        if taken.reading || taken.reply.is_some() {
            let e = DroverError::new(
                ErrorCode::RunTakenOver,
                format!(
                    "run {run_id} is still being {}; try again in a moment",
                    if taken.reading {
                        "handed back"
                    } else {
                        "taken over"
                    }
                ),
            );
            return self.reply_now(to, Err(e));
        }
        taken.reading = true;
        let since = taken.since;
        let Some(session) = run.provider_session_id.clone() else {
            return;
        };
        self.interactive_job(run_id, to, session, Some(since));
    }

    /// The command was made, or the record read.
    pub(super) fn on_interactive_done(&mut self, done: InteractiveDone) {
        let InteractiveDone {
            run_id,
            reply,
            outcome,
        } = done;
        match outcome {
            Ok(Interactively::Planned(plan)) => {
                if self
                    .runs
                    .get(&run_id)
                    .is_some_and(|r| r.taken_over.is_some())
                {
                    self.reply(reply, Ok(Response::TakeOver(plan)));
                } else {
                    // Stopped (or removed) meanwhile.
                    let e = match self.runs.get(&run_id) {
                        Some(run) => super::not_active(&run_id, run.state()),
                        None => super::not_found(&run_id),
                    };
                    self.reply_now(reply, Err(e));
                }
            }
            Ok(Interactively::Read(turns)) => self.handed_back(&run_id, reply, turns, None),
            Err(why) => {
                let reading = self
                    .runs
                    .get(&run_id)
                    .and_then(|r| r.taken_over.as_ref())
                    .is_some_and(|t| t.reading);
                if reading {
                    // The run is supervised again all the same; the note says what was
                    // not read.
                    self.handed_back(&run_id, reply, Vec::new(), Some(why));
                } else {
                    self.give_back_untaken(&run_id);
                    let e = DroverError::new(
                        ErrorCode::TakeOverUnsupported,
                        format!("cannot open run {run_id}'s CLI in its own interface: {why}"),
                    );
                    self.reply(reply, Err(e));
                }
            }
        }
    }

    /// A take-over that could not begin: the run is hibernated as it was.
    fn give_back_untaken(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.taken_over = None;
        let mut batch = Batch::default();
        let bound = Core::idle_bound(run, now);
        run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
        run.touch(&mut batch);
        self.commit(batch);
        self.start_queued();
    }

    /// Records what the user did in the CLI's interface and supervises the run again.
    fn handed_back(
        &mut self,
        run_id: &str,
        reply: ReplyTo,
        turns: Vec<InteractiveTurn>,
        unread: Option<String>,
    ) {
        let now = self.now;
        let mut booked = 0.0;
        let count = turns.len();
        for found in turns {
            let Some(run) = self.runs.get_mut(run_id) else {
                return;
            };
            let mut batch = Batch::default();
            let turn = Turn {
                number: run.turns.len() as u32 + 1,
                origin: TurnOrigin::Interactive,
                started_at: found.started_at,
                ended_at: Some(found.ended_at.max(found.started_at)),
                prompt_preview: self
                    .redactor
                    .redact(&super::prompts::preview(&found.prompt))
                    .into_owned(),
                text: self
                    .redactor
                    .redact(&crate::text::clip(
                        &found.text,
                        super::run::TURN_TEXT_MAX_CHARS,
                    ))
                    .into_owned(),
                tokens: found.tokens,
                cost_usd: None,
                result: None,
                commands: Vec::new(),
            };
            run.event(
                &mut batch,
                "turn_started",
                &serde_json::json!({"number": turn.number, "origin": turn.origin.as_str(), "prompt": turn.prompt_preview}),
                found.started_at.min(now),
            );
            // Its text is a transcript event of the turn, as a supervised turn's is, and its
            // end is recorded with it: the search index holds it and reads it back the same
            // way (docs/ARCHITECTURE.md §"Ledger").
            if !turn.text.is_empty() {
                run.append(
                    &mut batch,
                    crate::dispatch::projections::TRANSCRIPT_EVENT,
                    &super::provider_events::TranscriptBody {
                        line: None,
                        event: &crate::providers::ProviderEvent::AssistantText {
                            text: turn.text.clone(),
                        },
                    },
                    turn.ended_at.unwrap_or(found.started_at).min(now),
                    false,
                );
            }
            run.tokens.add(&turn.tokens);
            run.turns.push(turn);
            let end = TurnEnd {
                subtype: "interactive".into(),
                text: Some(found.text.clone()),
                tokens: found.tokens,
                model_usage: found
                    .model
                    .iter()
                    .map(|model| ModelUsage {
                        model: model.clone(),
                        tokens: found.tokens,
                        // OpenCode records dollars; the others tokens only.
                        cost_usd: found.cost_usd,
                    })
                    .collect(),
                ..TurnEnd::default()
            };
            let charge = self.book_turn(run_id, &end, &mut batch);
            booked += charge.unwrap_or(0.0);
            if let Some(run) = self.runs.get_mut(run_id)
                && let Some(turn) = run.turns.last_mut()
            {
                turn.cost_usd = charge;
                batch
                    .ops
                    .push(turn.end_record(run_id, Some(turn.text.clone())));
            }
            self.commit(batch);
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let provider = crate::providers::registry::cli_name(&run.spec.provider).to_string();
        run.taken_over = None;
        run.idle_since = Some(now);
        let mut batch = Batch::default();
        let note = match &unread {
            Some(why) => format!(
                "handed back from {provider}'s own interface; what happened there could not \
                 be read ({why}): its turns are not in drover's ledger"
            ),
            None => format!(
                "handed back from {provider}'s own interface: {count} turn{} (${booked:.4})",
                if count == 1 { "" } else { "s" }
            ),
        };
        run.note(&mut batch, note, now);
        let bound = Core::idle_bound(run, now);
        run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
        run.touch(&mut batch);
        self.commit(batch);
        self.check_money(run_id);
        self.measure(run_id);
        self.start_queued();
        let answer = self.summary_response(run_id);
        self.reply(reply, answer);
    }
}
