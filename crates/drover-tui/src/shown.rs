//! What the screen showed of each pending request, and since when: the answer guard
//! (docs/ARCHITECTURE.md §"The path of a permission answer").
//!
//! Each frame records every request it draws (on the attention line, in a prompt) with a
//! fingerprint of what it drew; a request drawn by the previous frame with the same
//! fingerprint keeps the moment it first appeared, anything else appears now. A key
//! that answers a request asks [`Shown::on_screen_for`]: the request, as the key would
//! answer it, must be on the last frame, unchanged, for at least the guard
//! (`[dashboard] answer_guard_ms`).
//!
//! What must stay true: only drawing records (a request counts as seen once a frame drew
//! it, never before); a request that a frame did not draw is forgotten, so it starts
//! again when it comes back; a request whose words changed starts again; the clock is the
//! model's (`now` is passed in), never read here.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use drover_core::UnixMillis;
use drover_core::dispatch::api::PendingView;

/// What the attention line and the prompt say when a key came before its request had
/// been on screen long enough to read.
pub const JUST_CHANGED: &str = "just changed — look again";

/// One request as drawn: its id and a fingerprint of its words.
type Key = (String, u64);

/// The requests the frames drew, and since when each has been on screen unchanged.
#[derive(Debug, Default)]
pub struct Shown {
    frames: RefCell<Frames>,
}

#[derive(Debug, Default)]
struct Frames {
    /// The last frame's requests (the one being drawn, while it is drawn).
    last: HashMap<Key, UnixMillis>,
    /// The frame before it.
    before: HashMap<Key, UnixMillis>,
}

impl Shown {
    /// A frame starts: what the last one drew becomes the frame before.
    pub fn begin_frame(&self) {
        let mut frames = self.frames.borrow_mut();
        frames.before = std::mem::take(&mut frames.last);
    }

    /// The frame being drawn shows `request` (once or more).
    pub fn drawn(&self, request: &PendingView, now: UnixMillis) {
        let key = (request.request_id.clone(), fingerprint(request));
        let mut frames = self.frames.borrow_mut();
        // A clock set back (the wall clock moved) never leaves it on screen "since later".
        let since = frames
            .before
            .get(&key)
            .map_or(now, |since| (*since).min(now));
        frames.last.entry(key).or_insert(since);
    }

    /// How long `request`, with exactly these words, has been on screen at `now`; `None`
    /// when the last frame did not draw it so.
    pub fn on_screen_for(&self, request: &PendingView, now: UnixMillis) -> Option<i64> {
        let key = (request.request_id.clone(), fingerprint(request));
        let since = *self.frames.borrow().last.get(&key)?;
        Some(now.saturating_sub(since).max(0))
    }

    /// Whether a key may answer `request` at `now`: on screen, unchanged, for at least
    /// `guard_ms`.
    pub fn readable(&self, request: &PendingView, now: UnixMillis, guard_ms: u64) -> bool {
        let guard = i64::try_from(guard_ms).unwrap_or(i64::MAX);
        self.on_screen_for(request, now)
            .is_some_and(|shown| shown >= guard)
    }
}

/// The words a request shows (its kind, tool, ask, "always" offer and guard flag): the
/// same request with other words is another sight. Its times are left out (a countdown
/// changes every second; the request does not).
fn fingerprint(request: &PendingView) -> u64 {
    let words = serde_json::to_string(&(
        request.kind,
        &request.tool,
        &request.ask,
        &request.always,
        &request.guard,
    ))
    .unwrap_or_default();
    let mut hasher = DefaultHasher::new();
    words.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::providers::{Ask, RequestKind};

    fn request(id: &str, command: &str) -> PendingView {
        PendingView {
            request_id: id.into(),
            kind: RequestKind::Permission,
            tool: "Bash".into(),
            ask: Ask::command(command, None, None),
            always: None,
            created_at: 0,
            expires_at: 600_000,
            guard: None,
        }
    }

    fn frame(shown: &Shown, now: UnixMillis, requests: &[&PendingView]) {
        shown.begin_frame();
        for r in requests {
            shown.drawn(r, now);
        }
    }

    #[test]
    fn a_request_counts_from_the_first_frame_that_drew_it_unchanged() {
        let shown = Shown::default();
        let a = request("a", "ls");
        assert_eq!(shown.on_screen_for(&a, 0), None, "never drawn");
        frame(&shown, 1_000, &[&a]);
        frame(&shown, 1_300, &[&a]);
        assert_eq!(shown.on_screen_for(&a, 1_450), Some(450));
        assert!(shown.readable(&a, 1_450, 400));
        assert!(!shown.readable(&a, 1_350, 400));

        // Its words change under the same id: it starts again.
        let changed = request("a", "rm -rf target");
        frame(&shown, 1_500, &[&changed]);
        assert_eq!(shown.on_screen_for(&changed, 1_600), Some(100));
        assert_eq!(
            shown.on_screen_for(&a, 1_600),
            None,
            "the old words are gone"
        );

        // A frame that does not draw it forgets it; it starts again when it comes back.
        frame(&shown, 2_000, &[]);
        frame(&shown, 2_100, &[&changed]);
        assert_eq!(shown.on_screen_for(&changed, 2_200), Some(100));
    }

    #[test]
    fn drawn_twice_in_one_frame_is_one_sight_and_a_clock_set_back_is_followed() {
        let shown = Shown::default();
        let a = request("a", "ls");
        frame(&shown, 1_000, &[&a, &a]);
        assert_eq!(shown.on_screen_for(&a, 900), Some(0), "never negative");
        assert!(shown.readable(&a, 1_000, 0));
        // The clock went back: on screen since the earlier time at most.
        frame(&shown, 500, &[&a]);
        assert_eq!(shown.on_screen_for(&a, 600), Some(100));
    }
}
