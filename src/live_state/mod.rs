//! (placeholder until the live-state branch merges)
use crate::UnixMillis;
use serde::{Deserialize, Serialize};
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveStateKind {
    Admitted,
    Working,
    Ended,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    ResidentReplaced,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    pub state: LiveStateKind,
    pub since: UnixMillis,
    pub bound: Option<UnixMillis>,
    pub detail: Option<String>,
    pub cause: Option<Cause>,
    pub seq: u64,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub expected_seq: u64,
    pub state: LiveStateKind,
    pub bound: Option<UnixMillis>,
    pub detail: Option<String>,
    pub cause: Option<Cause>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStateEvent {
    pub at: UnixMillis,
    pub assignment: Assignment,
}
pub fn assign(
    current: Option<&LiveState>,
    a: &Assignment,
    now: UnixMillis,
) -> Result<LiveState, ()> {
    Ok(LiveState {
        state: a.state,
        since: now,
        bound: a.bound,
        detail: a.detail.clone(),
        cause: a.cause,
        seq: current.map_or(0, |c| c.seq) + 1,
    })
}
pub struct Fold {
    pub state: Option<LiveState>,
    pub skipped: usize,
}
pub fn fold<'a>(events: impl IntoIterator<Item = &'a LiveStateEvent>) -> Fold {
    let mut f = Fold {
        state: None,
        skipped: 0,
    };
    for e in events {
        f.state = assign(f.state.as_ref(), &e.assignment, e.at).ok();
    }
    f
}
