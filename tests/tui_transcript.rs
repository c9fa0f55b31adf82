//! Reading a run's transcript (docs/ARCHITECTURE.md §"Reading a transcript"): snapshots of
//! the full-screen view (`t`) — the agent's markdown with a list and a code block, tool
//! calls collapsed, one expanded, a selection — and of the detail pane showing a
//! multi-line answer; and the keys that copy to the clipboard, down to the bytes the
//! terminal gets.
//!
//! Update after a deliberate UI change with `INSTA_UPDATE=always cargo test --test
//! tui_transcript` and review the `.snap` files like code.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

mod tui_common;

use crossterm::event::KeyCode;
use drover_core::dispatch::api::ResultView;
use drover_core::run_state::RunState;
use drover_tui::{App, Effect};
use tui_common::*;

fn snap(name: &str, app: &App) {
    let screen = render_app(app);
    insta::with_settings!({
        snapshot_path => "snapshots",
        prepend_module_to_snapshot => false,
        filters => vec![
            (r"\br[0-9][0-9a-z]{6,10}\b", "[run-id]"),
        ],
    }, {
        insta::assert_snapshot!(name, screen);
    });
}

fn press(app: &mut App, keys: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    for c in keys.chars() {
        let event = match c {
            ' ' => key(KeyCode::Char(' ')),
            c => char_key(c),
        };
        effects.extend(app.handle(event));
    }
    effects
}

/// The entries of a run's transcript ring, as the core makes them: the agent's text
/// with its line breaks, tool calls and their ends, and the other lines.
fn entries() -> Vec<String> {
    [
        "ready (2.1.0)",
        "session 8f198f6b on claude-sonnet-4-5",
        "text: I'll read the cache module first.",
        "tool Read: src/cache.rs",
        "tool done: 120 lines",
        "text: ## Plan\n\nThe cache misses because its key drops the tenant:\n\n1. Put the tenant in the key.\n2. Bump the cache version, so old entries go.\n\n```rust\nfn key(tenant: &str, path: &str) -> String {\n    format!(\"{tenant}:{path}\")\n}\n```",
        "tool Edit: src/cache.rs",
        "tool done: The file src/cache.rs has been updated.",
        "tool Bash: cargo test -p cache",
        "tool failed: exit code 101: test fixture_names_a_tenant failed",
        "text: Fixed the test's fixture; all green now.\n\n## Result\nstatus: done\nsummary: The cache key carries the tenant.\nchanges:\n- src/cache.rs: the key is tenant:path\n- tests: the fixture names a tenant",
        "turn done (session $0.0412)",
    ]
    .map(String::from)
    .to_vec()
}

/// One idle run, selected, its detail and the transcript above loaded.
fn transcript_app(width: u16, height: u16) -> App {
    let run = summary(1, "Fix the cache key", RunState::Idle);
    let mut app = app_with(vec![run.clone()], width, height);
    let mut view = view_of(&run);
    view.last_result = Some(ResultView {
        status: Some("done".into()),
        summary: Some("The cache key carries the tenant.".into()),
        question: None,
        files: vec![],
        changes: vec![
            "src/cache.rs: the key is tenant:path".into(),
            "tests: the fixture names a tenant".into(),
        ],
        follow_ups: vec![],
        json: None,
    });
    app.model.set_detail(view);
    app.model.set_transcript(&id(1), entries(), None);
    app.model.select(&id(1));
    app
}

#[test]
fn the_full_screen_transcript_reads_like_text() {
    let mut app = transcript_app(90, 40);
    press(&mut app, "t");
    snap("transcript_full_screen", &app);
}

#[test]
fn space_expands_a_tool_call_to_its_input_and_output() {
    let mut app = transcript_app(90, 40);
    // The first line, then down to the Bash call (the third tool call).
    press(&mut app, "tg");
    let lines = press_until(&mut app, "▸ Bash");
    assert!(lines < 40, "the Bash call is a line of its own");
    press(&mut app, " ");
    snap("transcript_tool_expanded", &app);
    // Again: collapsed as it was.
    press(&mut app, " ");
    let screen = render_app(&app);
    assert!(
        screen.contains("› ▸ Bash: cargo test -p cache · failed"),
        "{screen}"
    );
}

/// Moves the cursor down until its line starts with `text`; how many moves it took.
fn press_until(app: &mut App, text: &str) -> usize {
    for moves in 0..60 {
        if render_app(app).contains(&format!("› {text}")) {
            return moves;
        }
        press(app, "j");
    }
    panic!("no line starts with {text:?}:\n{}", render_app(app));
}

#[test]
fn v_then_j_selects_lines() {
    let mut app = transcript_app(90, 40);
    press(&mut app, "tg");
    press_until(&mut app, "1. Put");
    press(&mut app, "vjj");
    snap("transcript_selection", &app);
}

#[test]
fn v_j_j_y_copies_exactly_those_lines_through_osc_52() {
    let mut app = transcript_app(90, 40);
    press(&mut app, "tg");
    press_until(&mut app, "1. Put");
    let effects = press(&mut app, "vjjy");
    let copied: Vec<&String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Copy(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(
        copied,
        ["1. Put the tenant in the key.\n2. Bump the cache version, so old entries go.\n"],
        "the two list items and the blank line after them, as read"
    );
    // The bytes the terminal gets: OSC 52 on the clipboard with exactly those lines in
    // base64 (worked out by hand: `printf '…' | base64 -w0`).
    assert_eq!(
        drover_tui::terminal::osc52(copied[0]).as_bytes(),
        b"\x1b]52;c;MS4gUHV0IHRoZSB0ZW5hbnQgaW4gdGhlIGtleS4KMi4gQnVtcCB0aGUgY2FjaGUgdmVyc2lvbiwgc28gb2xkIGVudHJpZXMgZ28uCg==\x07"
    );
    let flash = app.model.flash.as_ref().expect("a flash");
    assert!(
        flash.text.starts_with("copied 3 lines ("),
        "says how many lines: {}",
        flash.text
    );
    assert!(!flash.error);
    // The selection is gone; the view stays.
    assert!(!render_app(&app).contains("selected"));
}

#[test]
fn the_result_key_copies_the_whole_result_block() {
    let mut app = transcript_app(90, 40);
    let effects = press(&mut app, "tY");
    assert_eq!(
        effects,
        [Effect::Copy(
            "## Result\nstatus: done\nsummary: The cache key carries the tenant.\nchanges:\n- src/cache.rs: the key is tenant:path\n- tests: the fixture names a tenant"
                .into()
        )]
    );
    let flash = app.model.flash.as_ref().expect("a flash");
    assert!(
        flash.text.starts_with("copied the result block (6 lines"),
        "{}",
        flash.text
    );
}

#[test]
fn the_result_key_writes_the_block_out_when_the_text_is_gone() {
    // Only the last lines are in the ring: the result comes from the run's view.
    let mut app = transcript_app(90, 40);
    app.model
        .set_transcript(&id(1), vec!["turn done (session $0.0412)".into()], None);
    let effects = press(&mut app, "tY");
    assert_eq!(
        effects,
        [Effect::Copy(
            "## Result\nstatus: done\nsummary: The cache key carries the tenant.\nchanges:\n- src/cache.rs: the key is tenant:path\n- tests: the fixture names a tenant"
                .into()
        )]
    );
}

#[test]
fn n_walks_the_filters_matches_and_esc_then_q_leave() {
    let mut app = transcript_app(90, 40);
    app.model.filter = "tenant".into();
    press(&mut app, "tg");
    press(&mut app, "n");
    assert!(render_app(&app).contains("› The cache misses because its key drops the tenant:"));
    press(&mut app, "n");
    assert!(render_app(&app).contains("› 1. Put the tenant in the key."));
    press(&mut app, "N");
    assert!(render_app(&app).contains("› The cache misses because its key drops the tenant:"));
    // esc drops a selection first, then leaves; q leaves at once.
    press(&mut app, "v");
    let _ = app.handle(key(KeyCode::Esc));
    assert!(app.views.top().is_some(), "esc dropped the selection only");
    let _ = app.handle(key(KeyCode::Esc));
    assert!(app.views.top().is_none(), "esc left the view");
    press(&mut app, "tq");
    assert!(app.views.top().is_none(), "q left the view");
}

#[test]
fn the_detail_pane_keeps_the_answers_line_breaks() {
    let app = transcript_app(110, 34);
    snap("detail_multi_line_answer", &app);
    // Nothing of the answer is flattened onto one line.
    let screen = render_app(&app);
    assert!(!screen.contains("## Result status"), "{screen}");
}

#[test]
fn a_click_on_the_detail_pane_opens_the_transcript() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let mut app = transcript_app(110, 34);
    let detail = app.model.areas().detail;
    let _ = app.handle(drover_tui::AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: detail.x + 4,
        row: detail.y + detail.height - 3,
        modifiers: KeyModifiers::NONE,
    }));
    assert!(
        render_app(&app).contains("Transcript · Fix the cache key"),
        "{}",
        render_app(&app)
    );
}

#[test]
fn tab_focuses_the_transcript_pane_and_enter_there_reads_it_full_screen() {
    let mut app = transcript_app(110, 34);
    let second = summary(2, "Port the CLI", RunState::Idle);
    let _ = app.model.upsert(second);
    app.model.select(&id(1));
    // The list has the focus: enter answers the run (an idle one: its follow-up box).
    let _ = app.handle(key(KeyCode::Enter));
    assert!(
        render_app(&app).contains("Follow-up"),
        "{}",
        render_app(&app)
    );
    let _ = app.handle(key(KeyCode::Esc));
    assert!(app.views.top().is_none());
    // tab: the transcript pane has the focus, its border heavy, and says what enter does.
    let _ = app.handle(key(KeyCode::Tab));
    snap("detail_focused", &app);
    // j/k scroll the transcript (G follows its end again), the selection stays.
    press(&mut app, "kk");
    assert_eq!(app.model.selected(), Some(id(1).as_str()));
    assert_eq!(app.model.transcript_scroll, Some(0));
    press(&mut app, "G");
    assert_eq!(app.model.transcript_scroll, None);
    assert_eq!(app.model.selected(), Some(id(1).as_str()));
    let _ = app.handle(key(KeyCode::Enter));
    assert!(
        render_app(&app).contains("Transcript · Fix the cache key"),
        "{}",
        render_app(&app)
    );
    // Leaving the view leaves the focus where it was; tab gives it back to the list,
    // where j selects and enter answers again.
    press(&mut app, "q");
    assert!(render_app(&app).contains("━━ transcript"));
    let _ = app.handle(key(KeyCode::Tab));
    assert!(!render_app(&app).contains("━━ transcript"));
    press(&mut app, "j");
    assert_eq!(app.model.selected(), Some(id(2).as_str()));
    let _ = app.handle(key(KeyCode::Enter));
    assert!(
        render_app(&app).contains("Follow-up"),
        "{}",
        render_app(&app)
    );
}
