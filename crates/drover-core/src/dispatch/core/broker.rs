//! The permission broker of one run (docs/ARCHITECTURE.md §"Permission prompts"): pending
//! requests, their expiry, and the rules an answer must pass. Pure: time is passed in.
//!
//! What must stay true: an answer names the request id it answers and lands on that
//! request or nowhere (`NO_PENDING_REQUEST`, `PERMISSION_ALREADY_RESOLVED`); requests are
//! kept oldest first; a request leaves the pending list exactly once (answered, expired,
//! withdrawn or drained by a stop). A request a restart left pending comes back with its
//! id (docs/ARCHITECTURE.md §"A restart"); the user's "allow" of it is carried to the
//! run's resumed session once: the same use asked again there is allowed by that answer,
//! and nothing else is.

use std::collections::{HashSet, VecDeque};

use crate::providers::{Ask, PermissionRequest, RequestKind};
use crate::{DroverError, ErrorCode, UnixMillis};

/// Resolved ids remembered per run, to tell "already resolved" from "never existed".
const RESOLVED_MEMORY: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub request: PermissionRequest,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
    /// The guard's reason, when it flagged the request (it then always asks).
    pub guard: Option<String>,
}

#[derive(Debug, Default)]
pub struct Broker {
    pending: Vec<Pending>,
    resolved: VecDeque<String>,
    /// (tool, ask) pairs the user allowed "always" for this run.
    always: HashSet<(String, Ask)>,
    /// Uses the user allowed, after a restart, on requests no CLI was left to hear:
    /// each allows the same use once, when the resumed session asks for it again.
    carried: Vec<(String, Ask)>,
}

impl Broker {
    /// Adds a request; `None` when the same id is already pending (the provider repeated
    /// itself) or was already resolved.
    pub fn add(
        &mut self,
        request: PermissionRequest,
        now: UnixMillis,
        permission_timeout_ms: i64,
        question_timeout_ms: i64,
    ) -> Option<&Pending> {
        let id = &request.request_id;
        if self.pending.iter().any(|p| &p.request.request_id == id) || self.resolved.contains(id) {
            return None;
        }
        let timeout = match request.kind {
            RequestKind::Permission => permission_timeout_ms,
            RequestKind::Question => question_timeout_ms,
        };
        self.pending.push(Pending {
            request,
            created_at: now,
            expires_at: now.saturating_add(timeout),
            guard: None,
        });
        self.pending.last()
    }

    /// Puts back a request a restart left pending, as it was asked (its id, its time,
    /// the guard's flag), to expire at `expires_at`; `false` when the id is already known.
    pub fn restore(
        &mut self,
        request: PermissionRequest,
        created_at: UnixMillis,
        expires_at: UnixMillis,
        guard: Option<String>,
    ) -> bool {
        let id = &request.request_id;
        if self.pending.iter().any(|p| &p.request.request_id == id) || self.resolved.contains(id) {
            return false;
        }
        self.pending.push(Pending {
            request,
            created_at,
            expires_at,
            guard,
        });
        true
    }

    /// Carries the user's "allow" of a request no CLI heard to the run's resumed session:
    /// the same use asked again there is allowed, once.
    pub fn carry_allow(&mut self, request: &PermissionRequest) {
        if request.kind == RequestKind::Permission {
            self.carried
                .push((request.tool.clone(), request.ask.clone()));
        }
    }

    /// Whether `request` asks again for a use the user allowed before a restart; the
    /// carried answer is used up by it.
    pub fn take_carried(&mut self, request: &PermissionRequest) -> bool {
        if request.kind != RequestKind::Permission {
            return false;
        }
        let found = self
            .carried
            .iter()
            .position(|(tool, ask)| *tool == request.tool && same_use(ask, &request.ask));
        found.map(|i| self.carried.remove(i)).is_some()
    }

    /// Marks a pending request as flagged by the guard, with its reason.
    pub fn flag(&mut self, request_id: &str, reason: String) {
        if let Some(p) = self
            .pending
            .iter_mut()
            .find(|p| p.request.request_id == request_id)
        {
            p.guard = Some(reason);
        }
    }

    /// Whether the user already allowed this exact tool use "always" on this run.
    pub fn allowed_always(&self, request: &PermissionRequest) -> bool {
        request.kind == RequestKind::Permission && self.always.contains(&always_key(request))
    }

    /// Remembers an "allow always" for requests identical to this one.
    pub fn remember_always(&mut self, request: &PermissionRequest) {
        self.always.insert(always_key(request));
    }

    /// Takes the request an answer names off the pending list.
    pub fn take_for_answer(&mut self, request_id: &str) -> Result<Pending, DroverError> {
        if let Some(pending) = self.take(request_id) {
            return Ok(pending);
        }
        if self.resolved.iter().any(|r| r == request_id) {
            return Err(DroverError::new(
                ErrorCode::PermissionAlreadyResolved,
                format!(
                    "request {request_id} was already answered, withdrawn or timed out; \
                     list what is pending with `drover show RUN`"
                ),
            ));
        }
        Err(DroverError::new(
            ErrorCode::NoPendingRequest,
            format!(
                "this run has no pending request {request_id}; list what is pending with \
                 `drover show RUN`"
            ),
        ))
    }

    /// The provider withdrew a request.
    pub fn withdraw(&mut self, request_id: &str) -> Option<Pending> {
        self.take(request_id)
    }

    /// Takes every request whose time is up (to be denied).
    pub fn take_expired(&mut self, now: UnixMillis) -> Vec<Pending> {
        let (expired, kept): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|p| p.expires_at <= now);
        self.pending = kept;
        for p in &expired {
            self.mark_resolved(&p.request.request_id);
        }
        expired
    }

    /// Takes every pending request (the run is stopping).
    pub fn drain(&mut self) -> Vec<Pending> {
        let all: Vec<_> = self.pending.drain(..).collect();
        for p in &all {
            self.mark_resolved(&p.request.request_id);
        }
        all
    }

    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn next_expiry(&self) -> Option<UnixMillis> {
        self.pending.iter().map(|p| p.expires_at).min()
    }

    fn take(&mut self, request_id: &str) -> Option<Pending> {
        let index = self
            .pending
            .iter()
            .position(|p| p.request.request_id == request_id)?;
        let pending = self.pending.remove(index);
        self.mark_resolved(request_id);
        Some(pending)
    }

    fn mark_resolved(&mut self, request_id: &str) {
        if self.resolved.len() == RESOLVED_MEMORY {
            self.resolved.pop_front();
        }
        self.resolved.push_back(request_id.to_string());
    }
}

fn always_key(request: &PermissionRequest) -> (String, Ask) {
    (request.tool.clone(), request.ask.clone())
}

/// Whether two asks are the same use of a tool: the same command line (whatever the
/// agent says of why, or where the CLI reports it runs), the same file change, the same
/// page, tool call or input.
fn same_use(a: &Ask, b: &Ask) -> bool {
    match (a, b) {
        (Ask::Command { command: x, .. }, Ask::Command { command: y, .. }) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, kind: RequestKind) -> PermissionRequest {
        PermissionRequest {
            request_id: id.into(),
            kind,
            tool: "Bash".into(),
            ask: Ask::command("ls", None, None),
            always: None,
            tool_use_id: None,
            blocked_path: None,
        }
    }

    const TEN_MIN: i64 = 600_000;
    const THIRTY_MIN: i64 = 1_800_000;

    #[test]
    fn permissions_and_questions_expire_after_their_own_timeouts() {
        let mut b = Broker::default();
        assert_eq!(
            b.add(
                request("p", RequestKind::Permission),
                1_000,
                TEN_MIN,
                THIRTY_MIN
            )
            .unwrap()
            .expires_at,
            1_000 + TEN_MIN
        );
        assert_eq!(
            b.add(
                request("q", RequestKind::Question),
                2_000,
                TEN_MIN,
                THIRTY_MIN
            )
            .unwrap()
            .expires_at,
            2_000 + THIRTY_MIN
        );
        assert_eq!(b.next_expiry(), Some(1_000 + TEN_MIN));
        assert!(b.take_expired(1_000 + TEN_MIN - 1).is_empty());
        let expired = b.take_expired(1_000 + TEN_MIN);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].request.request_id, "p");
        assert_eq!(b.pending().len(), 1);
        // The expired one now counts as resolved.
        assert_eq!(
            b.take_for_answer("p").unwrap_err().code,
            ErrorCode::PermissionAlreadyResolved
        );
    }

    #[test]
    fn an_answer_lands_on_its_request_or_nowhere() {
        let mut b = Broker::default();
        b.add(
            request("a", RequestKind::Permission),
            0,
            TEN_MIN,
            THIRTY_MIN,
        );
        b.add(
            request("b", RequestKind::Permission),
            1,
            TEN_MIN,
            THIRTY_MIN,
        );
        assert_eq!(
            b.take_for_answer("zzz").unwrap_err().code,
            ErrorCode::NoPendingRequest
        );
        assert_eq!(b.take_for_answer("b").unwrap().request.request_id, "b");
        assert_eq!(
            b.take_for_answer("b").unwrap_err().code,
            ErrorCode::PermissionAlreadyResolved
        );
        assert_eq!(b.pending()[0].request.request_id, "a");
    }

    #[test]
    fn repeated_or_resolved_ids_are_not_added_twice() {
        let mut b = Broker::default();
        assert!(
            b.add(request("a", RequestKind::Permission), 0, 1, 1)
                .is_some()
        );
        assert!(
            b.add(request("a", RequestKind::Permission), 0, 1, 1)
                .is_none()
        );
        b.take_for_answer("a").unwrap();
        assert!(
            b.add(request("a", RequestKind::Permission), 0, 1, 1)
                .is_none()
        );
    }

    #[test]
    fn withdraw_and_drain_clear_requests_once() {
        let mut b = Broker::default();
        b.add(request("a", RequestKind::Permission), 0, 1, 1);
        b.add(request("b", RequestKind::Question), 0, 1, 1);
        assert!(b.withdraw("a").is_some());
        assert!(b.withdraw("a").is_none());
        assert_eq!(b.drain().len(), 1);
        assert!(b.is_empty());
        assert_eq!(b.next_expiry(), None);
    }

    #[test]
    fn a_restored_request_keeps_its_id_and_an_answer_lands_on_it() {
        let mut b = Broker::default();
        assert!(b.restore(
            request("a", RequestKind::Permission),
            5,
            50,
            Some("flagged".into())
        ));
        assert!(
            !b.restore(request("a", RequestKind::Permission), 5, 50, None),
            "an id is put back once"
        );
        assert_eq!(b.pending()[0].created_at, 5);
        assert_eq!(b.next_expiry(), Some(50));
        assert_eq!(b.pending()[0].guard.as_deref(), Some("flagged"));
        assert_eq!(b.take_for_answer("a").unwrap().request.request_id, "a");
        assert!(!b.restore(request("a", RequestKind::Permission), 5, 50, None));
    }

    #[test]
    fn a_carried_allow_allows_the_same_use_once() {
        let mut b = Broker::default();
        let asked = request("a", RequestKind::Permission);
        b.carry_allow(&asked);
        // Asked again by the resumed session: another id, the agent's reason reworded.
        let mut again = request("b", RequestKind::Permission);
        again.ask = Ask::command("ls", None, Some("list the files again".into()));
        let mut other = request("c", RequestKind::Permission);
        other.ask = Ask::command("rm -rf target", None, None);
        assert!(
            !b.take_carried(&other),
            "another command is not allowed by it"
        );
        let mut other_tool = again.clone();
        other_tool.tool = "Shell".into();
        assert!(!b.take_carried(&other_tool));
        assert!(b.take_carried(&again));
        assert!(!b.take_carried(&again), "once");
        // A question's answer is carried in words, not as an allow.
        b.carry_allow(&request("q", RequestKind::Question));
        assert!(!b.take_carried(&request("q2", RequestKind::Question)));
    }

    #[test]
    fn allow_always_matches_the_same_tool_use_only() {
        let mut b = Broker::default();
        let r = request("a", RequestKind::Permission);
        assert!(!b.allowed_always(&r));
        b.remember_always(&r);
        assert!(b.allowed_always(&request("b", RequestKind::Permission)));
        let mut other = request("c", RequestKind::Permission);
        other.ask = Ask::command("rm -rf /", None, None);
        assert!(!b.allowed_always(&other));
        assert!(!b.allowed_always(&request("d", RequestKind::Question)));
    }
}
