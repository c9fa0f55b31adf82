//! Table tests of the result contract: the block grammar, where a block starts and ends,
//! caps, hostile inputs, and the JSON answer.

use super::*;
use serde_json::json;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A found block with the given fields set.
fn found(edit: impl FnOnce(&mut ResultBlock)) -> ResultBlock {
    let mut block = ResultBlock {
        found: true,
        ..ResultBlock::default()
    };
    edit(&mut block);
    block
}

fn done(summary: &str) -> ResultBlock {
    found(|b| {
        b.status = Some(ResultStatus::Done);
        b.raw_status = Some("done".into());
        b.summary = Some(summary.into());
    })
}

#[test]
fn result_blocks_are_read_as_the_contract_describes() {
    let cases: Vec<(&str, String, ResultBlock)> = vec![
        (
            "the canonical block",
            "I fixed it.\n\n## Result\nstatus: done\nsummary: Fixed the parser. Tests pass.\n\
             changes:\n- handle CRLF\n- cap items\nfiles:\n- src/parse.rs\n- src/lib.rs\n\
             follow_ups:\n- add a fuzz test\nquestion: none\n"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("Fixed the parser. Tests pass.".into());
                b.changes = strings(&["handle CRLF", "cap items"]);
                b.files = strings(&["src/parse.rs", "src/lib.rs"]);
                b.follow_ups = strings(&["add a fuzz test"]);
            }),
        ),
        ("no heading", "status: done\nsummary: x".into(), ResultBlock::default()),
        ("empty text", String::new(), ResultBlock::default()),
        ("only the heading", "## Result".into(), found(|_| {})),
        ("only the heading and a newline", "text\n## Result\n".into(), found(|_| {})),
        (
            "CRLF line endings",
            "## Result\r\nstatus: done\r\nsummary: ok\r\nfiles: a.rs, b.rs\r\n".into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("ok".into());
                b.files = strings(&["a.rs", "b.rs"]);
            }),
        ),
        ("level one, lower case, colon", "# result:\nstatus: done\nsummary: s".into(), done("s")),
        ("level three", "### Result\nstatus: done\nsummary: s".into(), done("s")),
        ("closing hashes", "## Result ##\nstatus: done\nsummary: s".into(), done("s")),
        ("bold heading line", "**Result**\nstatus: done\nsummary: s".into(), done("s")),
        ("bold heading with colon", "**Result:**\nstatus: done\nsummary: s".into(), done("s")),
        ("bold inside a heading", "## **Result**\nstatus: done\nsummary: s".into(), done("s")),
        (
            "level four is not a result heading",
            "#### Result\nstatus: done".into(),
            ResultBlock::default(),
        ),
        (
            "a heading inside a code block is ignored, the real one after it is read",
            "Use this format:\n```markdown\n## Result\nstatus: blocked\nsummary: example\n```\n\n\
             ## Result\nstatus: done\nsummary: real\n"
                .into(),
            done("real"),
        ),
        (
            "a heading only inside a tilde fence is not found",
            "~~~\n## Result\nstatus: done\n~~~\n".into(),
            ResultBlock::default(),
        ),
        (
            "a heading after an unterminated fence is inside it",
            "```\ncode\n## Result\nstatus: done\n".into(),
            ResultBlock::default(),
        ),
        (
            "two blocks: the last wins",
            "## Result\nstatus: blocked\nsummary: first\n\n## Result\nstatus: done\nsummary: second"
                .into(),
            done("second"),
        ),
        (
            "keys are case-insensitive, bulleted and bolded",
            "## Result\n- **Status**: Done.\n* **Summary:** Wrote it.\n+ FILES: x.rs\n1. Follow-Ups: ship\n"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("Done.".into());
                b.summary = Some("Wrote it.".into());
                b.files = strings(&["x.rs"]);
                b.follow_ups = strings(&["ship"]);
            }),
        ),
        (
            "follow-up spellings",
            "## Result\nfollow ups: a\nfollowups: b\nfollow_ups: c\nfollow-ups: d\n".into(),
            found(|b| b.follow_ups = strings(&["a", "b", "c", "d"])),
        ),
        (
            "status spellings for needs_input, with the question",
            "## Result\nstatus: needs input\nsummary: Stuck on config.\nquestion: Which database?\n"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::NeedsInput);
                b.raw_status = Some("needs input".into());
                b.summary = Some("Stuck on config.".into());
                b.question = Some("Which database?".into());
            }),
        ),
        (
            "NEEDS-INPUT and • bullets",
            "## Result\n• status: NEEDS-INPUT\n• question: Postgres or SQLite?".into(),
            found(|b| {
                b.status = Some(ResultStatus::NeedsInput);
                b.raw_status = Some("NEEDS-INPUT".into());
                b.question = Some("Postgres or SQLite?".into());
            }),
        ),
        (
            "an unreadable status keeps its raw value",
            "## Result\nstatus: done | blocked | needs_input\nsummary: s".into(),
            found(|b| {
                b.raw_status = Some("done | blocked | needs_input".into());
                b.summary = Some("s".into());
            }),
        ),
        (
            "status value on the next line",
            "## Result\nstatus:\n  blocked\nsummary: s".into(),
            found(|b| {
                b.status = Some(ResultStatus::Blocked);
                b.raw_status = Some("blocked".into());
                b.summary = Some("s".into());
            }),
        ),
        (
            "inline values: files split on commas, changes stay one item",
            "## Result\nchanges: did x, then y\nfiles: `a.rs`, b.rs , ,c.rs\n".into(),
            found(|b| {
                b.changes = strings(&["did x, then y"]);
                b.files = strings(&["a.rs", "b.rs", "c.rs"]);
            }),
        ),
        (
            "none markers empty a list or a question",
            "## Result\nchanges: none\nfiles: N/A\nfollow_ups: -\nquestion: n/a\nsummary: s".into(),
            found(|b| b.summary = Some("s".into())),
        ),
        (
            "a none bullet is dropped",
            "## Result\nfiles:\n- none\nchanges:\n- (none)\n".into(),
            found(|_| {}),
        ),
        (
            "blank lines are tolerated between keys and before items",
            "## Result\n\nstatus: done\n\nsummary: s\n\nchanges:\n\n- a\n\n- b\n".into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("s".into());
                b.changes = strings(&["a", "b"]);
            }),
        ),
        (
            "summary continues over following lines and stops at a blank line",
            "## Result\nstatus: done\nsummary: Fixed the bug\n  in the parser.\nIt was CRLF.\n\n\
             Let me know if you need anything else!\n"
                .into(),
            done("Fixed the bug in the parser. It was CRLF."),
        ),
        (
            "summary on the lines below its key",
            "## Result\nstatus: done\nsummary:\n\nOne sentence.\n".into(),
            done("One sentence."),
        ),
        (
            "question continues across blank lines until the next key",
            "## Result\nstatus: needs_input\nquestion: Which one?\n\nA: Postgres\n\nB: SQLite\nfiles: x.rs"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::NeedsInput);
                b.raw_status = Some("needs_input".into());
                b.question = Some("Which one? A: Postgres B: SQLite".into());
                b.files = strings(&["x.rs"]);
            }),
        ),
        (
            "prose after a list is not an item",
            "## Result\nfiles:\n- a.rs\n\nThanks for reading.\n- stray bullet after prose\n".into(),
            found(|b| b.files = strings(&["a.rs"])),
        ),
        (
            "plain lines directly under an empty list key are items",
            "## Result\nfiles:\nsrc/a.rs\nsrc/b.rs\n\nDone here.\n".into(),
            found(|b| b.files = strings(&["src/a.rs", "src/b.rs"])),
        ),
        (
            "an indented line continues a wrapped bullet",
            "## Result\nchanges:\n- Rewrote the parser so that\n  it handles CRLF\n- Added tests\n".into(),
            found(|b| b.changes = strings(&["Rewrote the parser so that it handles CRLF", "Added tests"])),
        ),
        (
            "bulleted keys with nested items; a nested key-like item stays an item",
            "## Result\n- status: done\n- changes:\n  - summary: rewrote the summary view\n  - b\n- files:\n  - x.rs\n- summary: s\n"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("s".into());
                b.changes = strings(&["summary: rewrote the summary view", "b"]);
                b.files = strings(&["x.rs"]);
            }),
        ),
        (
            "a heading of the same level ends the block",
            "## Result\nstatus: done\nsummary: s\n## Notes\nfiles: nope.rs\n".into(),
            done("s"),
        ),
        (
            "a higher-level heading ends the block",
            "### Result\nstatus: done\nsummary: s\n# Appendix\nfiles: nope.rs\n".into(),
            done("s"),
        ),
        (
            "a lower-level heading stays inside and closes the open key",
            "## Result\nstatus: done\nsummary: s\n### Details\nmore words\nfiles: a.rs\n".into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("s".into());
                b.files = strings(&["a.rs"]);
            }),
        ),
        (
            "a horizontal rule ends the block",
            "## Result\nstatus: done\nsummary: s\n---\nfiles: nope.rs\n".into(),
            done("s"),
        ),
        (
            "any heading ends a bold block",
            "**Result**\nstatus: done\nsummary: s\n#### Footnote\nfiles: nope.rs\n".into(),
            done("s"),
        ),
        (
            "code inside the block is skipped, and a heading in it does not end the block",
            "## Result\nstatus: done\nsummary: s\n```diff\n## Not a heading\nfiles: nope.rs\n```\nfiles: a.rs\n"
                .into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done".into());
                b.summary = Some("s".into());
                b.files = strings(&["a.rs"]);
            }),
        ),
        (
            "an unterminated fence inside the block hides the rest",
            "## Result\nstatus: done\nsummary: s\n```\nfiles: nope.rs\n".into(),
            done("s"),
        ),
        (
            "unicode values survive",
            "## Résumé\n## Result\nstatus: done ✅\nsummary: 修正しました。\nfiles: données/é.rs\n".into(),
            found(|b| {
                b.status = Some(ResultStatus::Done);
                b.raw_status = Some("done ✅".into());
                b.summary = Some("修正しました。".into());
                b.files = strings(&["données/é.rs"]);
            }),
        ),
        (
            "control characters are folded out of values",
            "## Result\nstatus: done\nsummary: a\u{1b}[2Jb\tc".into(),
            done("a [2Jb c"),
        ),
    ];
    for (name, text, want) in cases {
        assert_eq!(parse_result(&text), want, "{name}");
    }
}

#[test]
fn caps_bound_every_value() {
    let long_summary = "word ".repeat(2_000);
    let many_items: String = (0..80).map(|i| format!("- item {i}\n")).collect();
    let long_item = "é".repeat(1_000);
    let text = format!(
        "## Result\nstatus: {long_item}\nsummary: {long_summary}\nquestion: {long_summary}\n\
         changes:\n{many_items}files:\n- {long_item}\n"
    );
    let block = parse_result(&text);
    let summary = block.summary.unwrap_or_default();
    assert_eq!(summary.chars().count(), TEXT_MAX_CHARS);
    assert!(summary.ends_with('…'));
    assert_eq!(
        block.question.unwrap_or_default().chars().count(),
        TEXT_MAX_CHARS
    );
    assert_eq!(block.changes.len(), LIST_MAX_ITEMS);
    assert_eq!(block.changes.first().map(String::as_str), Some("item 0"));
    assert_eq!(block.changes.last().map(String::as_str), Some("item 49"));
    assert_eq!(block.files.len(), 1);
    assert_eq!(block.files[0].chars().count(), ITEM_MAX_CHARS);
    assert_eq!(
        block.raw_status.unwrap_or_default().chars().count(),
        ITEM_MAX_CHARS
    );
    assert_eq!(block.status, None);

    // Continuations stop growing long before a hostile megabyte is copied around.
    let endless = format!("## Result\nsummary: x\n{}", "more words\n".repeat(100_000));
    let summary = parse_result(&endless).summary.unwrap_or_default();
    assert_eq!(summary.chars().count(), TEXT_MAX_CHARS);
}

#[test]
fn hostile_inputs_never_panic_and_keep_their_meaning() {
    let megabyte_of_hashes = "#".repeat(1_000_000);
    assert_eq!(parse_result(&megabyte_of_hashes), ResultBlock::default());

    let hash_lines = "#\n".repeat(500_000);
    assert_eq!(parse_result(&hash_lines), ResultBlock::default());

    // Seven or more `#` are not a heading: after a blank line such a line is prose, right
    // under the summary it continues it (within the cap).
    let heading_then_hashes =
        format!("## Result\nstatus: done\nsummary: s\n\n{megabyte_of_hashes}");
    assert_eq!(parse_result(&heading_then_hashes), done("s"));
    let continued = format!("## Result\nstatus: done\nsummary: s\n{megabyte_of_hashes}");
    let summary = parse_result(&continued).summary.unwrap_or_default();
    assert!(summary.starts_with("s ###"));
    assert_eq!(summary.chars().count(), TEXT_MAX_CHARS);

    let many_headings = "## Result\nstatus: blocked\n".repeat(50_000) + "## Result\nstatus: done\n";
    let block = parse_result(&many_headings);
    assert_eq!(block.status, Some(ResultStatus::Done));

    let fences = "```\n".repeat(100_001) + "## Result\nstatus: done\n";
    // An odd number of fence lines leaves one open, so the heading is code.
    assert!(!parse_result(&fences).found);

    let huge_fence = format!("{}\n## Result\n", "`".repeat(1_000_000));
    assert!(!parse_result(&huge_fence).found);

    let long_key_line = format!("## Result\nstatus{}: done\n", " ".repeat(1_000_000));
    assert!(parse_result(&long_key_line).found);

    let colons = format!("## Result\n{}", ":".repeat(1_000_000));
    assert_eq!(parse_result(&colons), found(|_| {}));

    let mixed: String = (0..20_000)
        .map(|i| match i % 7 {
            0 => "## Result\r\n",
            1 => "- **status**: done\n",
            2 => "~~~\n",
            3 => "* * *\n",
            4 => "🦀🦀🦀: ✨\n",
            5 => "\u{0}\u{7f}\r\r\n",
            _ => "files: a, b, c, , ,\n",
        })
        .collect();
    let _ = parse_result(&mixed);

    for text in [
        "\r", "\n", "\r\n\r\n", "#", "## ", "```", "**", "- ", ":", "•", "1.",
    ] {
        let _ = parse_result(text);
        let _ = parse_json_result(text);
    }
}

#[test]
fn json_answers_are_read_from_the_whole_text_or_the_last_fenced_block() {
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, String, Option<serde_json::Value>)> = vec![
        ("whole text object", "{\"ok\": true}".into(), Some(json!({"ok": true}))),
        ("whole text array with whitespace", "\n  [1, 2]\n\n".into(), Some(json!([1, 2]))),
        ("a bare scalar is not an answer", "42".into(), None),
        ("a bare string is not an answer", "\"done\"".into(), None),
        ("no JSON at all", "All done, see the diff.".into(), None),
        (
            "a json fence after prose",
            "Here it is:\n```json\n{\"a\": 1}\n```\nThanks.".into(),
            Some(json!({"a": 1})),
        ),
        (
            "a bare fence",
            "Result:\n```\n[\"x\"]\n```".into(),
            Some(json!(["x"])),
        ),
        (
            "a JSON fence with attributes, upper case, tilde fence",
            "~~~JSON title=\"out\"\n{\"t\": 1}\n~~~".into(),
            Some(json!({"t": 1})),
        ),
        (
            "another language is ignored",
            "```rust\n{\"a\": 1}\n```".into(),
            None,
        ),
        (
            "several fences: the last that parses wins",
            "```json\n{\"n\": 1}\n```\n```json\n{\"n\": 2}\n```\n```json\n{not json\n```\n```python\n{\"n\": 4}\n```"
                .into(),
            Some(json!({"n": 2})),
        ),
        (
            "a fenced scalar does not count",
            "```json\n{\"n\": 1}\n```\n```json\n3\n```".into(),
            Some(json!({"n": 1})),
        ),
        (
            "an unterminated fence runs to the end",
            "Answer:\n```json\n{\"late\": true}\n".into(),
            Some(json!({"late": true})),
        ),
        (
            "a whole text that starts like JSON but is not falls back to fences",
            "{ this is prose }\n```json\n{\"a\": 1}\n```".into(),
            Some(json!({"a": 1})),
        ),
        ("CRLF inside a fence", "```json\r\n{\"a\": 1}\r\n```\r\n".into(), Some(json!({"a": 1}))),
        ("hostile nesting is refused, not overflowed", nested, None),
        ("a megabyte of braces", "{".repeat(1_000_000), None),
    ];
    for (name, text, want) in cases {
        assert_eq!(parse_json_result(&text), want, "{name}");
    }
}
