//! The search index at size: a ledger of `R` finished runs and `E` events shaped as the
//! dispatcher writes them (each run: its spec and task, run states, live states, a turn
//! with its result, a usage row, and transcript events — the agent's text, tool calls,
//! tool results, usage — of seeded words, Zipf-distributed), filled through drover's
//! schema and triggers; then:
//! - the ledger's size with the index and without it (the same rows, the index's tables
//!   and triggers dropped), each checkpointed;
//! - the migrations that build the index on a ledger from before it: 7 (the first index,
//!   a document per agent text event), then 8 (a document per turn's text) alone;
//! - `drover search QUERY --json`, the real binary exec'd: with no owner (read from the
//!   ledger) and with a `drover serve` owner up, the median of 9 of each, for a rare word,
//!   a quoted phrase, a common word, a prefix and a word in no run.
//!
//! Run: `cargo bench --bench search`. Sizes: `DROVER_BENCH_SEARCH` (default
//! `100000:2000000`, runs:events). Targets at 100,000 runs / 2,000,000 events: a search
//! answers within 50 ms, the index costs at most 30 % more ledger size. Prints figures,
//! asserts nothing.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod common;

use common::{DROP_SEARCH_INDEX, fts_options, median};
use drover_core::clock::now_millis;
use drover_core::ledger::{Ledger, LedgerOptions, LedgerReader, migrate_file_to};
use drover_core::paths::Paths;
use drover_core::providers::{Ask, ProviderEvent, TurnEnd};
use rusqlite::{Connection, params};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Execs of each command; the median is printed.
const SAMPLES: usize = 9;
/// Words in the vocabulary the texts are drawn from.
const VOCABULARY: usize = 6_000;

fn main() {
    let sizes = std::env::var("DROVER_BENCH_SEARCH").unwrap_or_else(|_| "100000:2000000".into());
    println!("search: finished runs in the ledger, `drover search` exec'd");
    for pair in sizes.split(',') {
        let (runs, events) = pair
            .split_once(':')
            .and_then(|(r, e)| Some((r.trim().parse().ok()?, e.trim().parse().ok()?)))
            .expect("DROVER_BENCH_SEARCH is runs:events[,runs:events]");
        measure(runs, events);
    }
}

/// splitmix64: the bench's seeded randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Seeded words, drawn Zipf-distributed (the first ones often, most rarely).
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new(rng: &mut Rng) -> Words {
        const SYLLABLES: &[&str] = &[
            "ca", "che", "de", "fi", "gra", "ho", "in", "ja", "ke", "lo", "mi", "nu", "op", "pra",
            "que", "ri", "sto", "ta", "ul", "ve", "wo", "xe", "yo", "zu", "ar", "en", "is", "on",
        ];
        let mut words = Vec::with_capacity(VOCABULARY);
        while words.len() < VOCABULARY {
            let n = 1 + rng.below(3);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect();
            if !words.contains(&word) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (0..VOCABULARY)
            .map(|r| {
                total += 1.0 / (r as f64 + 1.0);
                total
            })
            .collect();
        Words { words, cumulative }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let total = self.cumulative[VOCABULARY - 1];
        let x = (rng.next() as f64 / u64::MAX as f64) * total;
        let i = self
            .cumulative
            .partition_point(|c| *c < x)
            .min(VOCABULARY - 1);
        &self.words[i]
    }

    fn text(&self, rng: &mut Rng, min: usize, max: usize) -> String {
        let n = min + rng.below(max - min + 1);
        (0..n).map(|_| self.word(rng)).collect::<Vec<_>>().join(" ")
    }
}

/// A rare word (in 10 runs' tasks), a phrase (in 50 runs' agent text) and what each
/// query asks.
const RARE: &str = "kestrelwing";
const PHRASE: &str = "staging-eu";
fn queries(words: &Words) -> Vec<(String, String)> {
    vec![
        ("rare word".into(), RARE.into()),
        ("quoted phrase".into(), format!("\"{PHRASE}\"")),
        ("common word".into(), words.words[0].clone()),
        ("prefix".into(), format!("{}*", &words.words[3])),
        ("no run".into(), "zzyzxnothere".into()),
    ]
}

fn measure(runs: u64, events: u64) {
    let home = tempfile::tempdir().expect("temp dir");
    let paths = Paths::under(home.path());
    paths.ensure_dirs().expect("dirs");
    let bare = home.path().join("bare.sqlite3");
    let mut rng = Rng(0x5EED);
    let words = Words::new(&mut rng);

    let start = Instant::now();
    fill(&paths.ledger_file, runs, events, &words, &mut Rng(7), false);
    let indexed_fill = start.elapsed().as_secs_f64();
    let start = Instant::now();
    fill(&bare, runs, events, &words, &mut Rng(7), true);
    let bare_fill = start.elapsed().as_secs_f64();
    let indexed_mb = size_mb(&paths.ledger_file);
    let bare_mb = size_mb(&bare);

    // The ledger from before the index: migration 7, then migration 8 alone (the later
    // migrations' tables are there already: the ledger was filled by this drover).
    set_version(&bare, 6);
    let start = Instant::now();
    migrate_file_to(&bare, 7).expect("migration 7");
    let first_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    migrate_file_to(&bare, 8).expect("migration 8");
    let migrate_secs = start.elapsed().as_secs_f64();
    let migrated_mb = size_mb(&bare);

    println!("  {runs} runs, {events} events");
    println!(
        "    ledger without the index {bare_mb:>8.1} MB (filled in {bare_fill:.1} s)\n    \
         ledger with the index    {indexed_mb:>8.1} MB (filled in {indexed_fill:.1} s): +{:.1} % \
         (target <= 30 %)",
        100.0 * (indexed_mb - bare_mb) / bare_mb
    );
    println!(
        "    on the ledger without: migration 7 {first_secs:.1} s, then migration 8 rebuilding it {migrate_secs:.1} s (then {migrated_mb:.1} MB)"
    );

    let reader = LedgerReader::open(&paths.ledger_file).expect("reader");
    for (what, query) in queries(&words) {
        let start = Instant::now();
        let hits = reader.search(&query, 50).expect("search").len();
        let in_process = start.elapsed().as_secs_f64() * 1e3;
        let (mut offline, _) = search_ms(home.path(), &query);
        println!(
            "    search {what:<14} {query:<16} {hits:>3} lines: no owner {:>6.1} ms (in process {in_process:.1} ms)",
            median(&mut offline)
        );
    }
    drop(reader);

    let mut owner = common::exec::start_owner(home.path());
    for (what, query) in queries(&words) {
        let (mut owned, hits) = search_ms(home.path(), &query);
        println!(
            "    search {what:<14} {query:<16} {hits:>3} lines: owner up {:>6.1} ms (median of {SAMPLES})",
            median(&mut owned)
        );
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(owner.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = owner.wait();
}

/// `drover search QUERY --json`, exec'd [`SAMPLES`] times: each wall time, and how many
/// lines the last one found.
fn search_ms(home: &Path, query: &str) -> (Vec<f64>, usize) {
    let mut times = Vec::new();
    let mut hits = 0;
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["search", query, "--json"])
            .env("DROVER_HOME", home)
            .env_remove("DROVER_LOG")
            .output()
            .expect("drover search");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(
            out.status.success(),
            "drover search {query}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        hits = answer["hits"].as_array().map_or(0, Vec::len);
    }
    (times, hits)
}

/// The file's size once its WAL is checkpointed into it.
fn size_mb(path: &Path) -> f64 {
    let conn = Connection::open(path).expect("open");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    drop(conn);
    std::fs::metadata(path)
        .map(|m| m.len() as f64 / 1e6)
        .unwrap_or(0.0)
}

fn set_version(path: &Path, version: i64) {
    let conn = Connection::open(path).expect("open");
    conn.pragma_update(None, "user_version", version)
        .expect("version");
}

/// A transcript event's body as the dispatcher records it: its line and the event.
fn transcript(line: &str, event: &ProviderEvent) -> String {
    serde_json::to_string(&json!({"line": line, "event": event})).expect("json")
}

/// Fills `path` (drover's schema; without the index when `bare`) with `runs` finished
/// runs and `events` events, in transactions of 1,000 runs.
fn fill(path: &Path, runs: u64, events: u64, words: &Words, rng: &mut Rng, bare: bool) {
    let now = now_millis();
    {
        let (ledger, _) = Ledger::open(path, LedgerOptions::default(), now).expect("open ledger");
        ledger.close();
    }
    if !bare && let Some(extra) = fts_options(path) {
        println!("  (the index made with {extra:?})");
    }
    let mut conn = Connection::open(path).expect("open raw");
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    if bare {
        conn.execute_batch(DROP_SEARCH_INDEX).unwrap();
    }
    let per_run = (events / runs.max(1)).max(1);
    let base = now - 86_400_000;
    let step = (86_400_000 / runs.max(1) as i64).max(1);
    let mut i = 0;
    while i < runs {
        let tx = conn.transaction().unwrap();
        for r in i..(i + 1_000).min(runs) {
            insert_run(&tx, r, per_run, base + r as i64 * step, words, rng, !bare);
        }
        tx.commit().unwrap();
        i += 1_000;
    }
}

fn insert_run(
    tx: &rusqlite::Transaction<'_>,
    r: u64,
    per_run: u64,
    at: i64,
    words: &Words,
    rng: &mut Rng,
    indexed: bool,
) {
    let id = format!("r{r:07}");
    let mut task = words.text(rng, 12, 40);
    if r % 10_000 == 17 {
        task.push_str(&format!(" {RARE}"));
    }
    let title: String = task.chars().take(60).collect();
    let spec = json!({
        "provider": "claude-code", "model": "claude-sonnet-4-5", "cwd": "/home/dev/project",
        "task": task, "title": title, "tags": [], "capability": "workspace", "policy": "ask",
        "max_minutes": 45, "budget_usd": 5.0, "idle_timeout_secs": 1200, "max_turns": 10,
        "queue_if_busy": true, "workspace": "worktree"
    });
    let summary = words.text(rng, 8, 20);
    let result = json!({"found": true, "status": "done", "summary": summary,
        "changes": [words.text(rng, 4, 10)], "files": ["src/lib.rs"], "follow_ups": []});
    tx.prepare_cached(
        "INSERT INTO runs (run_id, created_at, updated_at, finished_at, state, completion_reason,
            provider, model, title, budget_session, spec_json, result_json)
         VALUES (?1, ?2, ?3, ?3, 'completed', 'complete', 'claude-code', 'claude-sonnet-4-5',
            ?4, 'default', ?5, ?6)",
    )
    .unwrap()
    .execute(params![
        id,
        at,
        at + 60_000,
        title,
        spec.to_string(),
        result.to_string()
    ])
    .unwrap();
    let mut texts = Vec::new();
    let seq = std::cell::Cell::new(0u64);
    let event = |kind: &str, body: String| {
        seq.set(seq.get() + 1);
        let seq = seq.get();
        if seq > per_run {
            return;
        }
        tx.prepare_cached(
            "INSERT INTO events (run_id, seq, kind, at, body_json) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .unwrap()
        .execute(params![id, seq as i64, kind, at + seq as i64 * 1_000, body])
        .unwrap();
    };
    let state = |from: &str, to: &str| json!({"from": from, "to": to, "reason": null}).to_string();
    let live = |state: &str, detail: &str, n: u64| {
        json!({"state": state, "bound": 1_900_000_000_000i64, "detail": detail, "cause": null,
               "seq": n, "expects": n - 1})
        .to_string()
    };
    // Each pass is one turn's worth: states, the agent's text, tool calls and their
    // results, usage; as many passes as the run's share of events needs.
    let mut pass = 0;
    while seq.get() < per_run {
        pass += 1;
        event("run_state", state("queued", "running"));
        event("live_state", live("working", "model turn", pass * 3));
        event(
            "transcript",
            transcript(
                "ready (2.1.0)",
                &ProviderEvent::Ready {
                    version: Some("2.1.0".into()),
                },
            ),
        );
        event(
            "turn_started",
            json!({"number": pass, "origin": "dispatch", "prompt": words.text(rng, 20, 30)})
                .to_string(),
        );
        for step in 0..3 {
            let mut text = words.text(rng, 10, 50);
            if r % 2_000 == 3 && step == 1 {
                text.push_str(&format!(" deployed to {PHRASE} at last"));
            }
            texts.push(text.clone());
            event(
                "transcript",
                transcript(
                    &format!("text: {}", text.chars().take(290).collect::<String>()),
                    &ProviderEvent::AssistantText { text },
                ),
            );
            let command = format!(
                "cargo test -p {} -- {} {}",
                words.word(rng),
                words.word(rng),
                words.word(rng)
            );
            event(
                "transcript",
                transcript(
                    &format!("tool Bash: {command}"),
                    &ProviderEvent::ToolStarted {
                        tool_use_id: format!("toolu_{r}_{pass}_{step}"),
                        name: "Bash".into(),
                        ask: Ask::Command {
                            command: command.clone(),
                            words: Some(command.split(' ').map(String::from).collect()),
                            cwd: Some("/home/dev/project".into()),
                            reason: Some(words.text(rng, 3, 8)),
                        },
                    },
                ),
            );
            let summary = words.text(rng, 3, 12);
            event(
                "transcript",
                transcript(
                    &format!("tool done: {summary}"),
                    &ProviderEvent::ToolFinished {
                        tool_use_id: format!("toolu_{r}_{pass}_{step}"),
                        is_error: false,
                        exit_code: Some(0),
                        summary,
                    },
                ),
            );
            event(
                "transcript",
                transcript(
                    "usage",
                    &ProviderEvent::Usage {
                        model: Some("claude-sonnet-4-5".into()),
                        tokens: Default::default(),
                    },
                ),
            );
        }
        event(
            "transcript",
            transcript(
                "turn done (session $0.0412)",
                &ProviderEvent::TurnCompleted(TurnEnd {
                    total_cost_usd: Some(0.0412),
                    ..TurnEnd::default()
                }),
            ),
        );
        event(
            "live_state",
            live("wrapping_up", "reading the result", pass * 3 + 1),
        );
        event("run_state", state("running", "idle"));
        // The turn's row, written at its end as the dispatcher does (its agent text is
        // indexed then).
        tx.prepare_cached(
            "INSERT INTO turns (run_id, number, origin, started_at, ended_at, prompt_preview,
                text, usage_json, cost_usd, result_json)
             VALUES (?1, ?2, 'dispatch', ?3, ?4, ?5, ?6, ?7, 0.0412, ?8)",
        )
        .unwrap()
        .execute(params![
            id,
            pass as i64,
            at,
            at + 60_000,
            words.text(rng, 20, 30),
            texts.join("\n\n"),
            json!({"input": 1200, "output": 300, "reasoning": 0, "cache_read": 8000, "cache_write": 0})
                .to_string(),
            result.to_string()
        ])
        .unwrap();
        // The turn's agent text, indexed as the writer indexes it with the turn's end.
        if indexed {
            drover_core::ledger::search::index_turn_text(
                tx,
                &id,
                pass as u32,
                false,
                Some(&texts.join("\n\n")),
            )
            .unwrap();
        }
        texts.clear();
    }
    tx.prepare_cached(
        "INSERT INTO usage (run_id, turn, at, provider, model, part, input, output, cost_usd,
            basis, fidelity, source, budget_session)
         VALUES (?1, 1, ?2, 'claude-code', 'claude-sonnet-4-5', 'main', 1200, 300, 0.0412,
            'reported', 'exact', 'result.total_cost_usd', 'default')",
    )
    .unwrap()
    .execute(params![id, at + 60_000])
    .unwrap();
}
