//! Tests of the live-state machine and of detail sanitising: tables of cases, no async, no
//! clock. The transition table below is copied from docs/ARCHITECTURE.md §"Live state" as
//! text, apart from the implementation, so a drift in either one fails here.

use super::*;
use LiveStateKind::*;

const NOW: UnixMillis = 1_700_000_000_000;
const LATER: UnixMillis = NOW + 60_000;

/// docs/ARCHITECTURE.md §"Live state", `from | to` rows as written there.
const DESIGN_TABLE: &str = "
admitted | waiting_deploy, waiting_repository, falling_back, preparing, working, wrapping_up, ended
waiting_deploy | waiting_repository, falling_back, preparing, working, wrapping_up, ended
waiting_repository | waiting_deploy, falling_back, preparing, working, wrapping_up, ended
falling_back | preparing, working, wrapping_up, ended
preparing | waiting_deploy, waiting_repository, falling_back, working, waiting_host, wrapping_up, ended
working | waiting_deploy, waiting_repository, falling_back, preparing, waiting_provider, waiting_host, wrapping_up, ended
waiting_provider | working, waiting_host, wrapping_up, ended
waiting_host | preparing, working, wrapping_up, ended
wrapping_up | ended
ended |
";

fn design_allows(from: LiveStateKind, to: LiveStateKind) -> bool {
    DESIGN_TABLE
        .lines()
        .filter_map(|row| row.split_once('|'))
        .find(|(f, _)| f.trim() == from.as_str())
        .is_some_and(|(_, tos)| tos.split(',').any(|t| t.trim() == to.as_str()))
}

/// A live state in `state`, entered a while ago, at sequence `seq`.
fn current(state: LiveStateKind, seq: u64) -> LiveState {
    LiveState {
        state,
        since: NOW - 5_000,
        bound: (!state.is_terminal()).then_some(NOW + 1_000),
        detail: Some("before".into()),
        cause: state.is_terminal().then_some(Cause::Failed),
        seq,
    }
}

/// An assignment that passes every rule but the transition itself: it gives both a bound
/// and a cause, so the one that does not apply must be dropped.
fn to(state: LiveStateKind, expected_seq: u64) -> Assignment {
    Assignment {
        expected_seq,
        state,
        bound: Some(LATER),
        detail: Some("after".into()),
        cause: Some(Cause::Completed),
        reopen: false,
    }
}

fn code(r: Result<LiveState, Refusal>) -> Result<LiveState, &'static str> {
    r.map_err(|e| e.code())
}

#[test]
fn every_pair_follows_the_design_table() {
    let (mut pairs, mut accepted) = (0, 0);
    for from in LiveStateKind::ALL {
        for next in LiveStateKind::ALL {
            pairs += 1;
            let before = current(from, 7);
            let got = code(assign(Some(&before), &to(next, 7), NOW));
            let expect_ok = !from.is_terminal() && (from == next || design_allows(from, next));
            assert_eq!(allowed(Some(from), next), expect_ok, "{from} -> {next}");
            match got {
                Ok(after) => {
                    assert!(expect_ok, "{from} -> {next} was accepted");
                    accepted += 1;
                    let ended = next.is_terminal();
                    // ("before" → "after": a preparing step with a new detail starts
                    // its own clock.)
                    let since = if from == next && from != Preparing {
                        before.since
                    } else {
                        NOW
                    };
                    let expected = LiveState {
                        state: next,
                        since,
                        bound: (!ended).then_some(LATER),
                        detail: Some("after".into()),
                        cause: ended.then_some(Cause::Completed),
                        seq: 8,
                    };
                    assert_eq!(after, expected, "{from} -> {next}");
                }
                Err(c) if from.is_terminal() => assert_eq!(c, "terminal", "{from} -> {next}"),
                Err(c) => {
                    assert!(!expect_ok, "{from} -> {next} was refused with {c}");
                    assert_eq!(c, "invalid-transition", "{from} -> {next}");
                }
            }
        }
    }
    // 47 moves in the table plus 9 same-state re-assignments.
    assert_eq!((pairs, accepted), (100, 56));
}

#[test]
fn a_run_starts_admitted_and_nowhere_else() {
    for next in LiveStateKind::ALL {
        let got = assign(None, &to(next, 0), NOW);
        assert_eq!(allowed(None, next), next == Admitted, "(none) -> {next}");
        if next == Admitted {
            let expected = LiveState {
                state: Admitted,
                since: NOW,
                bound: Some(LATER),
                detail: Some("after".into()),
                cause: None,
                seq: 1,
            };
            assert_eq!(got, Ok(expected));
        } else {
            assert_eq!(
                got,
                Err(Refusal::InvalidTransition {
                    from: None,
                    to: next
                })
            );
        }
    }
}

#[test]
fn each_refusal_has_its_reason_in_check_order() {
    let working = current(Working, 3);
    let ended = current(Ended, 3);
    let with = |state, expected_seq, bound, cause| Assignment {
        expected_seq,
        state,
        bound,
        detail: None,
        cause,
        reopen: false,
    };
    let cases: Vec<(&str, Option<&LiveState>, Assignment, Refusal)> = vec![
        (
            "stale on a fresh run",
            None,
            with(Admitted, 1, Some(LATER), None),
            Refusal::StaleSequence {
                expected: 1,
                current: 0,
            },
        ),
        (
            "stale behind",
            Some(&working),
            with(Working, 2, Some(LATER), None),
            Refusal::StaleSequence {
                expected: 2,
                current: 3,
            },
        ),
        (
            "stale before terminal",
            Some(&ended),
            with(Working, 4, None, None),
            Refusal::StaleSequence {
                expected: 4,
                current: 3,
            },
        ),
        (
            "terminal even to ended",
            Some(&ended),
            with(Ended, 3, None, Some(Cause::Stopped)),
            Refusal::Terminal,
        ),
        (
            "terminal before invalid transition",
            Some(&ended),
            with(Admitted, 3, None, None),
            Refusal::Terminal,
        ),
        (
            "invalid transition before cause",
            None,
            with(Ended, 0, None, None),
            Refusal::InvalidTransition {
                from: None,
                to: Ended,
            },
        ),
        (
            "invalid transition before bound",
            Some(&working),
            with(Admitted, 3, None, None),
            Refusal::InvalidTransition {
                from: Some(Working),
                to: Admitted,
            },
        ),
        (
            "cause required",
            Some(&working),
            with(Ended, 3, Some(NOW - 1), None),
            Refusal::CauseRequired,
        ),
        (
            "bound required",
            Some(&working),
            with(WrappingUp, 3, None, Some(Cause::Completed)),
            Refusal::BoundRequired { state: WrappingUp },
        ),
        (
            "bound in the past",
            Some(&working),
            with(WaitingProvider, 3, Some(NOW - 1), None),
            Refusal::InvalidBound {
                bound: NOW - 1,
                now: NOW,
            },
        ),
    ];
    for (name, cur, a, expected) in cases {
        assert_eq!(assign(cur, &a, NOW), Err(expected), "{name}");
    }
    let bound_now = with(WaitingProvider, 3, Some(NOW), None);
    assert!(
        assign(Some(&working), &bound_now, NOW).is_ok(),
        "a bound of now is not past"
    );
}

#[test]
fn refusals_have_stable_codes_and_sentences() {
    let cases = [
        (
            Refusal::StaleSequence {
                expected: 1,
                current: 2,
            },
            "stale-sequence",
        ),
        (
            Refusal::InvalidTransition {
                from: None,
                to: Working,
            },
            "invalid-transition",
        ),
        (Refusal::Terminal, "terminal"),
        (Refusal::BoundRequired { state: Working }, "bound-required"),
        (Refusal::InvalidBound { bound: 1, now: 2 }, "invalid-bound"),
        (Refusal::CauseRequired, "cause-required"),
    ];
    for (refusal, expected) in cases {
        assert_eq!(refusal.code(), expected);
        assert_eq!(serde_json::to_value(&refusal).ok(), Some(expected.into()));
        let sentence = refusal.to_string();
        assert!(
            sentence.starts_with(char::is_uppercase) && sentence.ends_with('.'),
            "{sentence}"
        );
    }
    assert_eq!(
        Refusal::InvalidTransition {
            from: None,
            to: Working
        }
        .to_string(),
        "A live state cannot move from (none) to working."
    );
}

/// While preparing, each step counts its own time (`preparing: running setup · 12s`
/// counts from the setup's start, not from the worktree's making or the wait for the
/// scripts' approval); the same step again keeps its clock.
#[test]
fn a_preparing_step_starts_its_own_clock() {
    let making = LiveState {
        state: Preparing,
        since: NOW - 30_000,
        bound: Some(NOW + 600_000),
        detail: Some("creating the worktree".into()),
        cause: None,
        seq: 2,
    };
    let setup = Assignment {
        expected_seq: 2,
        state: Preparing,
        bound: Some(NOW + 600_000),
        detail: Some("running setup".into()),
        cause: None,
        reopen: false,
    };
    let after = assign(Some(&making), &setup, NOW).expect("a new step");
    assert_eq!(after.since, NOW);
    let again = Assignment {
        expected_seq: 3,
        ..setup
    };
    let same = assign(Some(&after), &again, NOW + 5_000).expect("the same step");
    assert_eq!(same.since, NOW);
}

#[test]
fn same_state_keeps_since_and_updates_the_rest() {
    let before = LiveState {
        state: Working,
        since: NOW - 30_000,
        bound: Some(NOW + 600_000),
        detail: Some("model turn".into()),
        cause: None,
        seq: 4,
    };
    let tool = Assignment {
        expected_seq: 4,
        state: Working,
        bound: Some(NOW + 120_000),
        detail: Some("running a tool: Bash".into()),
        cause: None,
        reopen: false,
    };
    let after = assign(Some(&before), &tool, NOW);
    let expected = LiveState {
        bound: Some(NOW + 120_000),
        detail: Some("running a tool: Bash".into()),
        seq: 5,
        ..before.clone()
    };
    assert_eq!(after, Ok(expected));

    let cleared = Assignment {
        detail: None,
        ..tool
    };
    assert_eq!(
        assign(Some(&before), &cleared, NOW).map(|s| s.detail),
        Ok(None)
    );

    // Leaving and coming back is a change of state: `since` moves.
    let held =
        assign(Some(&before), &to(WaitingProvider, 4), NOW).expect("working -> waiting_provider");
    let back = assign(Some(&held), &to(Working, 5), NOW + 10).expect("waiting_provider -> working");
    assert_eq!((held.since, back.since, back.seq), (NOW, NOW + 10, 6));
}

#[test]
fn details_are_sanitised_on_assignment() {
    let a = Assignment {
        detail: Some("calling api\nwith api_key=abc123".into()),
        ..to(Admitted, 0)
    };
    let detail = assign(None, &a, NOW).map(|s| s.detail);
    assert_eq!(
        detail,
        Ok(Some("calling api with api_key=[redacted]".into()))
    );
    let page = Assignment {
        detail: Some("<html><body>502</body></html>".into()),
        ..a
    };
    assert_eq!(assign(None, &page, NOW).map(|s| s.detail), Ok(None));
}

#[test]
fn human_words_of_each_state() {
    let expected = [
        (Admitted, "admitted", "admitted"),
        (
            WaitingDeploy,
            "waiting_deploy",
            "waiting for the current deploy",
        ),
        (
            WaitingRepository,
            "waiting_repository",
            "waiting for the repository",
        ),
        (
            FallingBack,
            "falling_back",
            "switching to a fallback workspace",
        ),
        (Preparing, "preparing", "preparing the workspace"),
        (Working, "working", "working"),
        (
            WaitingProvider,
            "waiting_provider",
            "waiting for the model provider",
        ),
        (WaitingHost, "waiting_host", "waiting for host"),
        (WrappingUp, "wrapping_up", "wrapping up"),
        (Ended, "ended", "ended"),
    ];
    assert_eq!(expected.map(|(k, ..)| k), LiveStateKind::ALL);
    for (kind, name, human) in expected {
        assert_eq!((kind.as_str(), kind.human()), (name, human));
        assert_eq!(serde_json::to_value(kind).ok(), Some(name.into()));
        assert_eq!(kind.is_terminal(), kind == Ended);
    }
}

#[test]
fn causes_serialize_in_snake_case() {
    let causes = [
        (Cause::Completed, "completed"),
        (Cause::Failed, "failed"),
        (Cause::Stopped, "stopped"),
        (Cause::Withdrawn, "withdrawn"),
        (Cause::Refused, "refused"),
        (Cause::LeaseLapsed, "lease_lapsed"),
        (Cause::ResidentReplaced, "resident_replaced"),
        (Cause::RunnerGone, "runner_gone"),
    ];
    for (cause, name) in causes {
        assert_eq!(cause.as_str(), name);
        assert_eq!(serde_json::to_value(cause).ok(), Some(name.into()));
        assert_eq!(
            serde_json::from_value::<Cause>(name.into()).ok(),
            Some(cause)
        );
    }
}

#[test]
fn events_round_trip_through_json() {
    let event = LiveStateEvent {
        at: NOW,
        assignment: Assignment {
            cause: None,
            reopen: false,
            ..to(Preparing, 2)
        },
    };
    let json = serde_json::to_value(&event).expect("serializable");
    let expected = serde_json::json!({
        "at": NOW,
        "assignment": {
            "expected_seq": 2, "state": "preparing", "bound": LATER,
            "detail": "after", "cause": null
        }
    });
    assert_eq!(json, expected);
    assert_eq!(
        serde_json::from_value::<LiveStateEvent>(json).ok(),
        Some(event)
    );
    let state = current(Ended, 9);
    let back = serde_json::to_string(&state)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    assert_eq!(back, Some(state));
}

/// What a driver sees when it applies a script with `assign`, step by step.
struct Driven {
    live: Option<LiveState>,
    /// The events the ledger stores for the accepted steps.
    stored: Vec<LiveStateEvent>,
    /// Every attempted step as an event, refused ones included.
    attempted: Vec<LiveStateEvent>,
    refused: usize,
}

fn drive(script: &[(UnixMillis, Assignment)]) -> Driven {
    let mut d = Driven {
        live: None,
        stored: vec![],
        attempted: vec![],
        refused: 0,
    };
    for (at, a) in script {
        d.attempted.push(LiveStateEvent {
            at: *at,
            assignment: a.clone(),
        });
        match assign(d.live.as_ref(), a, *at) {
            Ok(next) => {
                d.stored.push(LiveStateEvent::accepted(a, &next, *at));
                d.live = Some(next);
            }
            Err(_) => d.refused += 1,
        }
    }
    d
}

/// Folding the stored events gives the driver's live state; folding every attempt gives
/// it too, with the refused ones skipped.
fn check_fold(script: &[(UnixMillis, Assignment)]) -> Driven {
    let d = drive(script);
    let expected = Fold {
        state: d.live.clone(),
        skipped: 0,
    };
    assert_eq!(fold(&d.stored), expected, "fold of stored events");
    let with_skips = Fold {
        skipped: d.refused,
        ..expected
    };
    assert_eq!(fold(&d.attempted), with_skips, "fold of attempts");
    d
}

fn step(
    at: UnixMillis,
    expected_seq: u64,
    state: LiveStateKind,
    detail: &str,
) -> (UnixMillis, Assignment) {
    let a = Assignment {
        expected_seq,
        state,
        bound: (!state.is_terminal()).then_some(at + 60_000),
        detail: Some(detail.into()),
        cause: state.is_terminal().then_some(Cause::Completed),
        reopen: false,
    };
    (at, a)
}

#[test]
fn fold_equals_the_assignments_applied_in_order() {
    let happy = vec![
        step(NOW, 0, Admitted, "accepted"),
        step(NOW + 1, 1, Preparing, "spawning claude"),
        step(NOW + 2, 2, Working, "model turn"),
        step(NOW + 3, 3, Working, "running a tool: Bash"),
        step(NOW + 4, 4, Working, "model turn"),
        step(NOW + 5, 5, WrappingUp, "writing the answer"),
        step(NOW + 6, 6, Ended, "done"),
    ];
    let detour = vec![
        step(NOW, 0, Admitted, ""),
        step(NOW + 10, 1, WaitingRepository, "another run holds /src"),
        step(NOW + 20, 2, WaitingDeploy, "claude is being updated"),
        step(NOW + 30, 3, FallingBack, "using a scratch worktree"),
        step(NOW + 40, 4, Preparing, "handshake"),
        step(NOW + 50, 5, Working, "model turn"),
        step(NOW + 60, 6, WaitingProvider, "rate limited, token=abc"),
        step(NOW + 70, 7, Working, "model turn"),
        step(NOW + 80, 8, Ended, "ERR_PROVIDER_GONE"),
    ];
    let with_refusals = vec![
        step(NOW, 0, Admitted, "accepted"),
        step(NOW + 1, 0, Preparing, "stale"),
        step(NOW + 2, 1, WaitingProvider, "invalid transition"),
        (
            NOW + 3,
            Assignment {
                bound: Some(NOW),
                ..step(NOW + 3, 1, Preparing, "past bound").1
            },
        ),
        (
            NOW + 4,
            Assignment {
                cause: None,
                reopen: false,
                ..step(NOW + 4, 1, Ended, "no cause").1
            },
        ),
        step(NOW + 5, 1, Ended, "withdrawn"),
        step(NOW + 6, 2, Admitted, "after the end"),
    ];
    let happy = check_fold(&happy).live;
    assert_eq!(
        happy.map(|s| (s.state, s.seq, s.since)),
        Some((Ended, 7, NOW + 6))
    );
    let detour = check_fold(&detour).live;
    assert_eq!(detour.map(|s| (s.seq, s.detail)), Some((9, None)));
    let refusals = check_fold(&with_refusals);
    assert_eq!(
        (refusals.live.map(|s| s.seq), refusals.refused),
        (Some(2), 5)
    );
    assert_eq!(fold([]), Fold::default());
}

#[test]
fn fold_skips_untrusted_events() {
    let script = [step(NOW, 0, Admitted, "a"), step(NOW + 1, 1, Working, "b")];
    let Driven { live, stored, .. } = drive(&script);
    // The same event twice, an event out of order, an event whose bound had already passed.
    let mut tampered = vec![stored[0].clone(), stored[0].clone(), stored[1].clone()];
    tampered.push(LiveStateEvent {
        at: NOW + 2,
        assignment: to(Preparing, 9),
    });
    tampered.push(LiveStateEvent {
        at: LATER + 1,
        assignment: to(Preparing, 2),
    });
    assert_eq!(
        fold(&tampered),
        Fold {
            state: live,
            skipped: 3
        }
    );
}

/// A small deterministic generator (Knuth's MMIX LCG), so the tests need no rand crate.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    "model turn", "running a tool: Bash", " ", "\n", "\t", "\u{0}", "\u{1b}[2J", "\u{200B}", "é",
    "🦀", "日本", "x", "_", "=", ":", ",", "[", "]", "{", "}", "\"", "'", "…", "[redacted]", "[redac",
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "sk-abcdefghijklmnopqr", "password=", "api_key", "hunter2",
    "Bearer ", "Bearer", "eyJhbGciOi.J9", "Authorization: ", "token: ", "<b>", "</b>", "<html>",
    "ERR_X", "E_NOENT", "null", "panicked at", "AKIAIOSFODNN7EXAMPLE", "xoxb-0123456789-abc",
    "ghp_0123456789abcdefghijKLMNOP", "https://", "https://u:p@host/",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];

fn junk(rng: &mut Lcg) -> String {
    (0..rng.below(60)).map(|_| rng.pick(FRAGMENTS)).collect()
}

#[test]
fn fold_matches_live_state_over_random_scripts() {
    let mut rng = Lcg(0x5eed);
    let (mut accepted, mut refused) = (0, 0);
    // (More scripts since `waiting_host`: a state more makes a random move likelier to be
    // refused.)
    for _ in 0..400 {
        let (mut script, mut live, mut at) = (vec![], None::<LiveState>, NOW);
        for _ in 0..rng.below(40) {
            at += rng.below(5_000) as i64;
            let seq = live.as_ref().map_or(0, |s| s.seq);
            let a = Assignment {
                // Mostly the seq the driver knows, sometimes a stale or future one.
                expected_seq: if rng.below(10) < 8 {
                    seq
                } else {
                    rng.below(seq as usize + 3) as u64
                },
                state: rng.pick(&LiveStateKind::ALL),
                bound: rng.pick(&[None, Some(at - 1), Some(at), Some(at + 90_000)]),
                detail: (rng.below(3) > 0).then(|| junk(&mut rng)),
                cause: rng.pick(&[None, Some(Cause::Stopped), Some(Cause::RunnerGone)]),
                reopen: false,
            };
            if let Ok(next) = assign(live.as_ref(), &a, at) {
                live = Some(next);
            }
            script.push((at, a));
        }
        let d = check_fold(&script);
        assert_eq!(d.live, live);
        (accepted, refused) = (accepted + d.stored.len(), refused + d.refused);
        if let Some(s) = live {
            assert_eq!(s.seq as usize, d.stored.len());
            assert_eq!(s.state.is_terminal(), s.bound.is_none());
            assert_eq!(s.state.is_terminal(), s.cause.is_some());
            assert!(s.bound.is_none_or(|b| b >= s.since));
        }
    }
    // The generator must reach both paths, or the checks above prove little.
    assert!(
        accepted > 500 && refused > 500,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn sanitize_keeps_ordinary_details_on_one_line() {
    let unchanged = [
        "model turn",
        "running a tool: Bash",
        "fixing the ERR_TIMEOUT handling",
        "[1/3] building",
        "comparing Vec<String>, Option<u8>, Box<T>",
        "max_tokens=4096 for task-abcdefghijklmnopqrstu",
        "Bearer tokens expire",
    ];
    for raw in unchanged {
        assert_eq!(sanitize_detail(raw).as_deref(), Some(raw));
    }
    let cleaned = [
        (
            "  line one\r\nline two\n\n\tthree  ",
            "line one line two three",
        ),
        ("a\u{0}b\u{1b}[31mred\u{7f}", "a b [31mred"),
        ("wor\u{200B}king \u{202E}now", "working now"),
    ];
    for (raw, expected) in cleaned {
        assert_eq!(sanitize_detail(raw).as_deref(), Some(expected), "{raw:?}");
    }
    for blank in ["", " \n\t\r ", "\u{0}\u{200B}"] {
        assert_eq!(sanitize_detail(blank), None, "{blank:?}");
    }
}

#[test]
fn sanitize_redacts_secrets() {
    let cases = [
        (
            "key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt_uv-w done",
            "key [redacted] done",
        ),
        ("sk-proj-abcdefghijklmnop1234", "[redacted]"),
        (
            "push ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ok",
            "push [redacted] ok",
        ),
        ("gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "[redacted]"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "[redacted]",
        ),
        (
            "posting with xoxb-123456789012-abcdefABCDEF",
            "posting with [redacted]",
        ),
        ("aws AKIAIOSFODNN7EXAMPLE here", "aws [redacted] here"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def",
            "Authorization: [redacted]",
        ),
        (
            "curl -H 'Bearer abcdef123456'",
            "curl -H 'Bearer [redacted]'",
        ),
        ("api_key=abc123 next", "api_key=[redacted] next"),
        ("APIKEY: xyz", "APIKEY: [redacted]"),
        ("login password = hunter2", "login password = [redacted]"),
        ("passwd=x;y", "passwd=[redacted];y"),
        (
            "sent \"secret\": \"two words\" ok",
            "sent \"secret\": \"[redacted]\" ok",
        ),
        (
            "GET /?access_token=abc&x=1",
            "GET /?access_token=[redacted]&x=1",
        ),
        ("client_secret=abc", "client_secret=[redacted]"),
        (
            "clone https://user:pa55@example.com/r.git",
            "clone https://[redacted]@example.com/r.git",
        ),
    ];
    for (raw, expected) in cases {
        assert_eq!(sanitize_detail(raw).as_deref(), Some(expected), "{raw:?}");
    }
}

#[test]
fn sanitize_cuts_at_160_characters() {
    let cut = |s: String| Some(format!("{s}…"));
    let marker = format!("{} sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "a".repeat(155));
    let cases = [
        ("é".repeat(160), Some("é".repeat(160))),
        ("é".repeat(161), cut("é".repeat(159))),
        ("日本語".repeat(100), cut("日本語".repeat(53))),
        ("🦀".repeat(170), cut("🦀".repeat(159))),
        // The space before the cut is trimmed; a `[redacted]` marker is never split.
        (
            format!("{} {}", "a".repeat(158), "b".repeat(10)),
            cut("a".repeat(158)),
        ),
        (marker, cut("a".repeat(155))),
    ];
    for (raw, expected) in cases {
        let got = sanitize_detail(&raw);
        assert_eq!(got, expected, "{raw:?}");
        assert!(got.is_some_and(|d| d.chars().count() <= MAX_DETAIL_CHARS));
    }
}

#[test]
fn sanitize_drops_pages_and_internal_errors() {
    let dropped = [
        "<!DOCTYPE html>\n<html><head><title>502</title></head></html>",
        "\n  <HTML lang=\"en\">Bad gateway",
        "oops <body>",
        "<head><meta charset=utf-8>",
        "<div><p>Service Unavailable</p></div>",
        "ERR_CONNECTION_RESET",
        "E_NOENT",
        "INTERNAL_SERVER_ERROR",
        "ECONNRESET",
        "internal_error",
        "InternalServerError",
        "std::io::Error",
        "null",
        " undefined\n",
        "[object Object]",
        "thread 'main' panicked at src/main.rs:3:5:\nboom",
        "Traceback (most recent call last):\n  File \"x.py\", line 1",
        "{\"error\":{\"type\":\"overloaded_error\"}}",
        "[1, 2, 3]",
        "{ \"type\": \"error\", \"message\": \"Overlo",
    ];
    for raw in dropped {
        assert_eq!(sanitize_detail(raw), None, "{raw:?}");
    }
}

#[test]
fn sanitize_is_safe_and_idempotent_on_any_input() {
    let mut rng = Lcg(42);
    let mut inputs: Vec<String> = (0..10_000).map(|_| junk(&mut rng)).collect();
    inputs.push("x\u{10FFFF}\u{FFFD}\u{1F600}\u{300}".repeat(10_000));
    inputs.push(format!(
        "{}sk-ant-api03-AbCdEfGhIjKlMnOpQrSt",
        " \n".repeat(100_000)
    ));
    inputs.push("[".repeat(100_000));
    let (mut kept, mut cut) = (0, 0);
    for raw in &inputs {
        let Some(once) = sanitize_detail(raw) else {
            continue;
        };
        kept += 1;
        cut += usize::from(once.chars().count() == MAX_DETAIL_CHARS);
        assert!(
            !once.is_empty() && once.chars().count() <= MAX_DETAIL_CHARS,
            "{once:?}"
        );
        assert!(
            !once.contains(|c: char| c.is_control()) && once.trim() == once,
            "{once:?}"
        );
        for secret in [
            "AbCdEfGhIj",
            "IOSFODNN7",
            "0123456789abcdefghij",
            "xoxb-",
            "u:p@",
        ] {
            assert!(
                !once.contains(secret),
                "{secret} leaked from {raw:?}: {once:?}"
            );
        }
        assert_eq!(sanitize_detail(&once).as_ref(), Some(&once), "from {raw:?}");
    }
    // The generator must reach both paths, or the checks above prove little.
    assert!(
        kept > inputs.len() / 5 && cut > 200,
        "{kept} kept, {cut} cut"
    );
}

#[test]
fn a_reopen_is_the_one_way_out_of_ended_and_only_to_admitted() {
    let reopen = |state| Assignment {
        reopen: true,
        cause: None,
        ..to(state, 7)
    };
    // From `ended` to `admitted`: a new segment, seq goes on, the cause is gone.
    let next = assign(
        Some(&current(LiveStateKind::Ended, 7)),
        &reopen(LiveStateKind::Admitted),
        NOW,
    )
    .expect("a reopen from ended");
    assert_eq!(next.state, LiveStateKind::Admitted);
    assert_eq!(next.seq, 8);
    assert_eq!(next.since, NOW);
    assert_eq!(next.cause, None);
    assert_eq!(next.bound, Some(LATER));

    // A reopen to anything but `admitted`, or from anything but `ended`, is refused.
    for target in LiveStateKind::ALL {
        if target == LiveStateKind::Admitted {
            continue;
        }
        let got = code(assign(
            Some(&current(LiveStateKind::Ended, 7)),
            &reopen(target),
            NOW,
        ));
        assert_eq!(got.err(), Some("invalid-transition"), "ended → {target:?}");
    }
    for from in LiveStateKind::ALL {
        if from == LiveStateKind::Ended {
            continue;
        }
        let got = code(assign(
            Some(&current(from, 7)),
            &reopen(LiveStateKind::Admitted),
            NOW,
        ));
        assert_eq!(
            got.err(),
            Some("invalid-transition"),
            "reopen from {from:?}"
        );
    }
    let first = Assignment {
        expected_seq: 0,
        ..reopen(LiveStateKind::Admitted)
    };
    let got = code(assign(None, &first, NOW));
    assert_eq!(
        got.err(),
        Some("invalid-transition"),
        "reopen of no live state"
    );

    // A reopen still needs the right seq and a bound.
    let stale = Assignment {
        expected_seq: 6,
        ..reopen(LiveStateKind::Admitted)
    };
    let got = code(assign(Some(&current(LiveStateKind::Ended, 7)), &stale, NOW));
    assert_eq!(got.err(), Some("stale-sequence"));
    let unbounded = Assignment {
        bound: None,
        ..reopen(LiveStateKind::Admitted)
    };
    let got = code(assign(
        Some(&current(LiveStateKind::Ended, 7)),
        &unbounded,
        NOW,
    ));
    assert_eq!(got.err(), Some("bound-required"));
}

#[test]
fn a_fold_replays_a_reopened_run_into_its_second_segment() {
    let step = |expected_seq, state, cause, reopen| Assignment {
        expected_seq,
        state,
        bound: (state != LiveStateKind::Ended).then_some(LATER),
        detail: None,
        cause,
        reopen,
    };
    let script = [
        step(0, LiveStateKind::Admitted, None, false),
        step(1, LiveStateKind::Working, None, false),
        step(
            2,
            LiveStateKind::Ended,
            Some(Cause::ResidentReplaced),
            false,
        ),
        step(3, LiveStateKind::Admitted, None, true),
        step(4, LiveStateKind::Preparing, None, false),
    ];
    let mut live = None;
    let mut events = Vec::new();
    for a in &script {
        let next = assign(live.as_ref(), a, NOW).expect("each step is accepted");
        events.push(LiveStateEvent::accepted(a, &next, NOW));
        live = Some(next);
    }
    // The stored events keep the reopen mark, through JSON too.
    let stored: Vec<LiveStateEvent> = events
        .iter()
        .map(|e| serde_json::from_value(serde_json::to_value(e).unwrap()).unwrap())
        .collect();
    let folded = fold(&stored);
    assert_eq!(folded.skipped, 0);
    assert_eq!(folded.state, live);
    // Without the mark, the same event is refused: nothing leaves `ended` by accident.
    let mut forged = stored.clone();
    forged[3].assignment.reopen = false;
    let folded = fold(&forged);
    assert_eq!(folded.skipped, 2);
    assert_eq!(folded.state.unwrap().state, LiveStateKind::Ended);
}
