//! The permission broker of one run (docs/ARCHITECTURE.md §"Permission prompts"): pending
//! requests, their expiry, and the rules an answer must pass. Pure: time is passed in.
//!
//! What must stay true: an answer names the request id it answers and lands on that
//! request or nowhere (`NO_PENDING_REQUEST`, `PERMISSION_ALREADY_RESOLVED`); requests are
//! kept oldest first; a request leaves the pending list exactly once (answered, expired,
//! withdrawn or drained by a stop).

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
