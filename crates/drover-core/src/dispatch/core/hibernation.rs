//! Idle runs (docs/ARCHITECTURE.md §"Idle runs"): hibernating an idle run, waking it in its
//! provider session, and hibernating idle runs whose rail slot a queued run needs.
//!
//! An idle run with a warm child hibernates after `[limits] hibernate_after_secs` with no
//! follow-up (the timer is in `timers.rs`), or at once when a queued run is blocked only
//! by the slots idle runs hold. Its child is asked to shut down (the CLI keeps its session
//! on disk); once it has exited the run is idle with no child: live line "idle ·
//! hibernated", no slot, no reservation, its idle timeout still running. A follow-up (or
//! `resume` with the user's words) wakes it: the adapter is launched again with the
//! recorded provider session (`LaunchSpec::resume_session`), and once it is ready the turn
//! is sent as if the child had stayed up. A wake whose rail is full waits in the queue
//! like a new run. A run put back after a restart (`restore.rs`) is hibernated the same
//! way, and has its worktree checked before its CLI starts for a turn.
//!
//! A run dispatched with `--no-queue` onto a rail that idle runs fill makes room the same
//! way (one planner, [`Core::room_plan`]): it is admitted `starting` and waits for their
//! children to exit; it is refused only when hibernating cannot give it a slot.
//!
//! What must stay true: only a run whose provider reported a session hibernates; a
//! hibernating run holds its slot until its child has exited; a wake never starts a
//! second child for a run; `hibernate_after_secs = 0` turns hibernation off (by time and
//! for the queue alike).

use super::Core;
use super::rails::{self, RailBlock, RailSlot};
use super::run::{
    Batch, HIBERNATED_DETAIL, HIBERNATING_DETAIL, IDLE_DETAIL, TurnOrigin, WAKING_DETAIL,
};
use crate::UnixMillis;
use crate::live_state::LiveStateKind;
use crate::providers::ProviderCommand;
use crate::run_state::RunState;

/// The live line's detail of a `--no-queue` run waiting for the slot of an idle run that
/// hibernates for it.
pub const ROOM_DETAIL: &str = "starting once an idle run has hibernated to give its slot";

impl Core {
    /// Whether hibernation is on (`hibernate_after_secs` > 0).
    pub(super) fn hibernation_on(&self) -> bool {
        self.limits().hibernate_after_secs > 0
    }

    /// When an idle run falls due to hibernate, if it may.
    pub(super) fn hibernate_due(&self, run: &super::run::Run) -> Option<UnixMillis> {
        if !self.hibernation_on() || !run.can_hibernate() {
            return None;
        }
        let after = super::answers::secs_ms(self.limits().hibernate_after_secs);
        // Woken ahead of a follow-up that has not come: counted from the wake.
        let since = run.idle_since?.max(run.warmed_at.unwrap_or(0));
        Some(since.saturating_add(after))
    }

    /// The idle bound of a run: when its idle timeout ends it.
    pub(super) fn idle_bound(run: &super::run::Run, now: UnixMillis) -> UnixMillis {
        let timeout = super::answers::secs_ms(run.spec.idle_timeout_secs);
        run.idle_since.unwrap_or(now).saturating_add(timeout)
    }

    /// Asks an idle run's child to shut down, its provider session kept.
    pub(super) fn hibernate(&mut self, run_id: &str, why: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if !run.can_hibernate() {
            return;
        }
        run.hibernating = true;
        let mut batch = Batch::default();
        let bound = Self::idle_bound(run, now);
        run.note(
            &mut batch,
            format!("hibernating ({why}): its CLI is shut down, its provider session kept"),
            now,
        );
        run.working(&mut batch, bound, HIBERNATING_DETAIL, now);
        run.touch(&mut batch);
        self.commit(batch);
        self.send(run_id, ProviderCommand::Shutdown);
    }

    /// The child of a hibernating run has exited: the run is hibernated (or woken at once,
    /// when a follow-up came meanwhile), and its slot goes to the queue.
    pub(super) fn on_hibernated(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.hibernating = false;
        run.hibernated = true;
        run.warming = false;
        let wake_ahead = std::mem::take(&mut run.wake_ahead_asked);
        run.child = None;
        run.ready = false;
        run.launch_notice = None;
        let mut batch = Batch::default();
        let taken_over = run.taken_over.is_some();
        if run.wake.is_none() && !taken_over {
            let bound = Self::idle_bound(run, now);
            run.working(&mut batch, bound, HIBERNATED_DETAIL, now);
        }
        run.touch(&mut batch);
        self.commit(batch);
        if taken_over {
            // Its child has exited: the user gets the CLI's own interface now.
            self.plan_take_over(run_id);
            self.check_waiters();
            return;
        }
        // The slot goes to the runs that waited for it first (it may have been freed for
        // them); a run woken meanwhile wakes after them, or waits in the queue.
        self.start_queued();
        if self.runs.get(run_id).is_some_and(|r| r.wake.is_some()) {
            self.wake_now(run_id);
        } else if wake_ahead {
            self.wake_ahead(run_id);
        }
        self.check_waiters();
    }

    /// Wakes a hibernated (or hibernating) run for `prompt`: its adapter is launched in
    /// the recorded provider session, or the run waits in the queue for a slot.
    pub(super) fn wake(&mut self, run_id: &str, prompt: String, origin: TurnOrigin) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.wake = Some((prompt, origin));
        if run.hibernating || run.warming {
            // Its child is on its way out (woken once it has exited), or already starting
            // (the turn goes once it is ready).
            return;
        }
        self.wake_now(run_id);
    }

    /// `wake`: starts a hibernated run's child in its provider session with no turn, so
    /// that the follow-up being written starts as on a warm run (a hibernating run's,
    /// once its old child has exited). Only when its slot is free to take: with a queued
    /// run waiting, or its rail full, it stays hibernated (the follow-up wakes it, queued
    /// if need be).
    pub(super) fn wake_ahead(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        if run.hibernating && run.wake.is_none() && run.ending.is_none() {
            // Its child is on its way out: woken ahead once it has exited.
            if let Some(run) = self.runs.get_mut(run_id) {
                run.wake_ahead_asked = true;
            }
            return;
        }
        if !run.hibernated
            || run.host_wait.is_some()
            || run.state() != RunState::Idle
            || run.wake.is_some()
            || run.launching
            || run.ending.is_some()
        {
            return;
        }
        let slot = self.slot_of(run);
        if !self.queue.is_empty()
            || rails::blocked_by(self.limits(), &self.holding_slots(), &slot).is_some()
        {
            return;
        }
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.warming = true;
        run.warmed_at = Some(now);
        let mut batch = Batch::default();
        let bound = Self::idle_bound(run, now);
        run.working(&mut batch, bound, WAKING_DETAIL, now);
        self.commit(batch);
        self.launch_woken(run_id);
    }

    /// A run woken ahead is ready: idle with a warm child, its hibernation timer counting
    /// from the wake.
    pub(super) fn on_warm(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.warming = false;
        let mut batch = Batch::default();
        let bound = Self::idle_bound(run, now);
        run.working(&mut batch, bound, IDLE_DETAIL, now);
        run.touch(&mut batch);
        self.commit(batch);
    }

    /// A run woken ahead whose child could not start, or exited before it was ready: it
    /// is hibernated again (a follow-up tries once more, and fails the run if it fails
    /// too), with `note` saying why.
    pub(super) fn warm_failed(&mut self, run_id: &str, note: String) {
        let now = self.now;
        if let Some(run) = self.runs.get_mut(run_id) {
            let mut batch = Batch::default();
            run.note(
                &mut batch,
                format!("waking ahead failed ({note}); it stays hibernated"),
                now,
            );
            self.commit(batch);
        }
        self.on_hibernated(run_id);
    }

    /// Launches a hibernated run with a turn to send, or queues it when a rail is full.
    fn wake_now(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get(run_id) else {
            return;
        };
        let slot = self.slot_of(run);
        match rails::blocked_by(self.limits(), &self.holding_slots(), &slot) {
            None => self.launch_woken(run_id),
            Some(block) => {
                if let Some(run) = self.runs.get_mut(run_id) {
                    let mut batch = Batch::default();
                    let bound = Self::idle_bound(run, now);
                    run.note(
                        &mut batch,
                        format!("waking when a slot frees: {}", block.describe()),
                        now,
                    );
                    run.working(
                        &mut batch,
                        bound,
                        &format!("{HIBERNATED_DETAIL}: waking when a slot frees"),
                        now,
                    );
                    self.commit(batch);
                }
                self.enqueue(run_id);
            }
        }
    }

    /// Starts the adapter of a run being woken, in its provider session. A run put back
    /// after a restart has its worktree checked first when it wakes for a turn.
    pub(super) fn launch_woken(&mut self, run_id: &str) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.hibernated = false;
        // A new process starts its session's running totals from nothing.
        run.last_total_cost = 0.0;
        let for_a_turn = run.wake.is_some();
        let mut batch = Batch::default();
        run.note(&mut batch, "waking in its provider session", now);
        self.commit(batch);
        if for_a_turn && self.prepare_workspace(run_id) {
            return;
        }
        self.launch_now(run_id);
    }

    /// Hibernates idle runs whose slots queued runs need (see [`Core::room_plan`]).
    /// Called where slots or the queue change — a run queued, a queued run started or a
    /// slot freed ([`Core::start_queued`]: a run ended, a child exited, the limits were
    /// read again), a run gone idle — never on every event.
    pub(super) fn make_room(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let Some(plan) = self.room_plan(None) else {
            return;
        };
        for id in plan.hibernate {
            self.hibernate(&id, "a run waiting to start needs its slot");
        }
    }

    /// A run dispatched with `--no-queue` that idle runs hibernating let start: it is
    /// `starting` (not queued: it does not count against the queue's limit), its live
    /// line says what it waits for, and it waits at the back of the queue — where the
    /// planner gave it the slot — while those runs hibernate.
    pub(super) fn wait_for_room(&mut self, run_id: &str, block: &RailBlock, plan: &RoomPlan) {
        let now = self.now;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.waiting_for_room = true;
        let mut batch = Batch::default();
        run.set_state(&mut batch, RunState::Starting, None, now);
        let deadline = run.deadline;
        run.set_live(
            &mut batch,
            LiveStateKind::Admitted,
            Some(deadline),
            Some(ROOM_DETAIL),
            None,
            now,
        );
        let whom = match plan.hibernate.as_slice() {
            [] => "an idle run already hibernating gives".to_string(),
            [one] => format!("idle run {one} gives as it hibernates"),
            many => format!("idle runs {} give as they hibernate", many.join(", ")),
        };
        run.note(
            &mut batch,
            format!(
                "not queued (--no-queue): {}; it starts in the slot {whom}",
                block.describe()
            ),
            now,
        );
        run.touch(&mut batch);
        self.commit(batch);
        self.enqueue(run_id);
    }

    /// What making room would do for the queue, with `extra` (a run being admitted with
    /// `--no-queue`) behind it: the queue is played forward (runs that can start, start;
    /// runs already hibernating count as gone), and where a run is still blocked, the
    /// idle run idle longest whose slot would let one start is taken. `None` when
    /// hibernation is off or drover is shutting down.
    pub(super) fn room_plan(&self, extra: Option<&RailSlot>) -> Option<RoomPlan> {
        if self.shutting_down() || !self.hibernation_on() {
            return None;
        }
        let mut holding: Vec<(Option<String>, RailSlot)> = self
            .runs
            .values()
            .filter(|r| r.holds_slot() && !r.hibernating)
            .map(|r| (Some(r.id.clone()), self.slot_of(r)))
            .collect();
        // Each waiting run's slot, and whether it is `extra`.
        // A run in the queue that holds its slot (an idle run whose follow-up waits for
        // money) needs no room.
        let mut queue: Vec<(bool, RailSlot)> = self
            .queue
            .iter()
            .filter_map(|id| self.runs.get(id).filter(|r| !r.holds_slot()))
            .map(|r| (false, self.slot_of(r)))
            .chain(extra.map(|slot| (true, slot.clone())))
            .collect();
        let mut idle: Vec<(UnixMillis, String)> = self
            .runs
            .values()
            .filter(|r| r.can_hibernate())
            .map(|r| (r.idle_since.unwrap_or(0), r.id.clone()))
            .collect();
        idle.sort();
        let mut plan = RoomPlan::default();
        while !queue.is_empty() {
            let slots: Vec<RailSlot> = holding.iter().map(|(_, s)| s.clone()).collect();
            let waiting: Vec<RailSlot> = queue.iter().map(|(_, s)| s.clone()).collect();
            if let Some(index) = rails::next_to_start(self.limits(), &slots, &waiting) {
                let (is_extra, slot) = queue.remove(index);
                plan.extra_starts |= is_extra;
                holding.push((None, slot));
                continue;
            }
            // Blocked: the idle run (longest idle first) whose slot lets a waiting run go.
            let found = idle.iter().position(|(_, id)| {
                let without: Vec<RailSlot> = holding
                    .iter()
                    .filter(|(holder, _)| holder.as_deref() != Some(id.as_str()))
                    .map(|(_, s)| s.clone())
                    .collect();
                rails::next_to_start(self.limits(), &without, &waiting).is_some()
            });
            let Some(at) = found else {
                break;
            };
            let (_, id) = idle.remove(at);
            holding.retain(|(holder, _)| holder.as_deref() != Some(id.as_str()));
            plan.hibernate.push(id);
        }
        Some(plan)
    }
}

/// What making room comes to (see [`Core::room_plan`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RoomPlan {
    /// The idle runs to hibernate, longest idle first.
    pub hibernate: Vec<String>,
    /// Whether the run being admitted starts once they (and the runs already
    /// hibernating) have given their slots.
    pub extra_starts: bool,
}
