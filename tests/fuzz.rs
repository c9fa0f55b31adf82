//! Every parser of outside input on the stable toolchain: each fuzz target of
//! `drover::fuzz` replays its kept corpus (`fuzz/corpus/<target>/`, which libFuzzer
//! campaigns grow) and then a bounded number of inputs made by proptest — random bytes,
//! and corpus entries with bytes flipped, inserted, cut and lines spliced.
//!
//! `DROVER_FUZZ_CASES` sets the number of generated inputs per target (default 2,000,
//! which keeps CI to about a minute); `scripts/fuzz.sh --stable N` runs more. Each run
//! takes a new seed, printed per target; `DROVER_FUZZ_SEED=<that number>` replays it
//! input for input. A panic is a failure, and proptest prints the input that caused it,
//! shrunk, with the seed to replay it.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::path::Path;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus of {target} ({}): {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// One way to change an input.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Cut(usize, usize),
    /// Repeat a line (or a piece) many times.
    Repeat(usize, usize, u16),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Flip(at, b)),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..8),
                prop::sample::select(vec![
                    b"\"".to_vec(),
                    b"{".to_vec(),
                    b"}".to_vec(),
                    b"[".to_vec(),
                    b"\n".to_vec(),
                    b"null".to_vec(),
                    b"-1".to_vec(),
                    b"1e999".to_vec(),
                    b"18446744073709551616".to_vec(),
                    "\u{0}\u{202e}é日".as_bytes().to_vec(),
                    b"\\u0000".to_vec(),
                ]),
            ]
        )
            .prop_map(|(at, bytes)| Edit::Insert(at, bytes)),
        (any::<usize>(), 0usize..64).prop_map(|(at, n)| Edit::Cut(at, n)),
        (any::<usize>(), 1usize..200, 1u16..64).prop_map(|(at, n, k)| Edit::Repeat(at, n, k)),
    ]
}

fn apply(mut input: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let len = input.len();
        match e {
            Edit::Flip(at, b) if len > 0 => input[at % len] ^= b | 1,
            Edit::Insert(at, bytes) => {
                let at = if len == 0 { 0 } else { at % (len + 1) };
                input.splice(at..at, bytes.iter().copied());
            }
            Edit::Cut(at, n) if len > 0 => {
                let at = at % len;
                let end = (at + n).min(len);
                input.drain(at..end);
            }
            Edit::Repeat(at, n, k) if len > 0 => {
                let at = at % len;
                let end = (at + n).min(len);
                let piece = input[at..end].to_vec();
                for _ in 0..*k {
                    input.splice(end..end, piece.iter().copied());
                }
            }
            _ => {}
        }
        input.truncate(1 << 20);
    }
    input
}

fn cases() -> u32 {
    std::env::var("DROVER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// The seed of this run: `DROVER_FUZZ_SEED` when set (a failure's replay), else a new
/// one.
fn seed() -> u64 {
    match std::env::var("DROVER_FUZZ_SEED") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            panic!("DROVER_FUZZ_SEED={v:?} is not a number: give the seed a run printed")
        }),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 ^ u64::from(std::process::id())),
    }
}

/// proptest's generator for `seed` (ChaCha: the same seed gives the same inputs).
fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&seed.rotate_left(i as u32 * 16).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

fn run(target: &str) {
    let fuzz = drover::fuzz::target(target).expect("a target of drover::fuzz");
    let seeds = corpus(target);
    assert!(!seeds.is_empty(), "{target} has a corpus");
    for seed in &seeds {
        fuzz(seed);
        // Every line alone, and every prefix cut at a line, too.
        for (i, _) in seed.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            fuzz(&seed[..i]);
            fuzz(&seed[i + 1..]);
        }
    }
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        (
            prop::sample::select(seeds),
            prop::collection::vec(edit(), 1..12)
        )
            .prop_map(|(seed, edits)| apply(seed, &edits)),
    ];
    let seed = seed();
    println!("{target}: DROVER_FUZZ_SEED={seed}");
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: cases(),
            failure_persistence: None,
            ..Config::default()
        },
        rng(seed),
    );
    runner
        .run(&strategy, |input| {
            fuzz(&input);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{target} (replay with DROVER_FUZZ_SEED={seed}): {e}"));
}

#[test]
fn every_target_has_a_test_here() {
    let tested = [
        "claude_stream_json",
        "codex_exec_jsonl",
        "codex_app_server",
        "opencode_events",
        "acp_messages",
        "result_block",
        "socket_request",
        "config",
        "redact",
    ];
    let targets: Vec<&str> = drover::fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(targets, tested);
}

#[test]
fn claude_stream_json() {
    run("claude_stream_json");
}

#[test]
fn codex_exec_jsonl() {
    run("codex_exec_jsonl");
}

#[test]
fn codex_app_server() {
    run("codex_app_server");
}

#[test]
fn opencode_events() {
    run("opencode_events");
}

#[test]
fn acp_messages() {
    run("acp_messages");
}

#[test]
fn result_block() {
    run("result_block");
}

#[test]
fn socket_request() {
    run("socket_request");
}

#[test]
fn config() {
    run("config");
}

#[test]
fn redact() {
    run("redact");
}

/// A printed seed replays its run: the same seed makes the same inputs, another seed
/// others.
#[test]
fn a_seed_replays_the_same_inputs() {
    let strategy = prop::collection::vec(any::<u8>(), 0..64);
    let inputs = |seed: u64| {
        let mut runner = TestRunner::new_with_rng(Config::default(), rng(seed));
        (0..50)
            .map(|_| {
                strategy
                    .new_tree(&mut runner)
                    .map(|t| proptest::strategy::ValueTree::current(&t))
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(inputs(42), inputs(42));
    assert_ne!(inputs(42), inputs(43));
}
