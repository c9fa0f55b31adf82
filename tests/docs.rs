//! The project's design documents (`docs/ARCHITECTURE.md`, `docs/PROVIDERS.md`) and the
//! places that cite them: every `§"Section"` in the code, the config, the tests, the
//! scripts, the README and the docs themselves names a heading that exists in the
//! document cited before it, and nothing cites a document that is not in the repository.
#![allow(clippy::unwrap_used)] // a test or bench may unwrap; the workspace denies it elsewhere

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The documents a `§` may cite.
const DOCS: [&str; 2] = ["ARCHITECTURE.md", "PROVIDERS.md"];
/// Where citations live.
const SCANNED: [&str; 9] = [
    "crates",
    "src",
    "assets",
    "tests",
    "benches",
    "scripts",
    "fuzz",
    "docs",
    "README.md",
];

/// The `##`/`###` headings of each document, as written.
fn headings() -> BTreeMap<&'static str, Vec<String>> {
    DOCS.iter()
        .map(|doc| {
            let text = std::fs::read_to_string(Path::new(ROOT).join("docs").join(doc))
                .unwrap_or_else(|e| panic!("docs/{doc}: {e}"));
            let heads = text
                .lines()
                .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
                .map(|h| h.trim().to_string())
                .collect();
            (*doc, heads)
        })
        .collect()
}

fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if matches!(name, "target" | "node_modules" | "snapshots" | "corpus") {
            continue;
        }
        files_under(&p, out);
    }
}

/// Every problem with the citations in `text` (a file at `rel`): a `§` not followed by
/// a quoted section name, a name that is no heading of the document cited before it, a
/// `§` with no document cited before it, a document that is not in the repository.
fn problems(rel: &str, text: &str, heads: &BTreeMap<&str, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    // In a document, a `§"…"` with no other document named before it on its line is one
    // of its own sections; in code, a citation may wrap, so the last document named holds.
    let own: Option<&str> = DOCS.iter().copied().find(|d| rel == format!("docs/{d}"));
    let mut current = own;
    for (n, line) in text.lines().enumerate() {
        if own.is_some() {
            current = own;
        }
        let at = |what: String| format!("{rel}:{}: {what}", n + 1);
        for gone in ["DESIGN.md", "STYLE.md", "shared/docs"] {
            if line.contains(gone) {
                out.push(at(format!("cites {gone}, which is not in the repository")));
            }
        }
        // Walk the line: document names and `§` marks in the order they appear.
        let mut rest = line;
        while !rest.is_empty() {
            let next_doc = DOCS
                .iter()
                .filter_map(|d| rest.find(d).map(|i| (i, *d)))
                .min();
            let next_mark = rest.find('§');
            match (next_doc, next_mark) {
                (Some((i, doc)), mark) if mark.is_none_or(|m| i < m) => {
                    current = Some(doc);
                    rest = &rest[i + doc.len()..];
                }
                (_, Some(m)) => {
                    let after = &rest[m + '§'.len_utf8()..];
                    let Some(quoted) = after.strip_prefix('"') else {
                        out.push(at("a § not followed by a quoted section name".into()));
                        rest = after;
                        continue;
                    };
                    let Some(end) = quoted.find('"') else {
                        out.push(at("a § whose section name has no closing quote".into()));
                        break;
                    };
                    let name = &quoted[..end];
                    match current {
                        None => out.push(at(format!("§\"{name}\" names no document before it"))),
                        Some(doc) if !heads[doc].iter().any(|h| h == name) => {
                            out.push(at(format!("docs/{doc} has no section \"{name}\"")))
                        }
                        Some(_) => {}
                    }
                    rest = &quoted[end + 1..];
                }
                _ => break,
            }
        }
    }
    out
}

#[test]
fn every_cited_section_exists_in_docs() {
    let heads = headings();
    let mut files = Vec::new();
    for place in SCANNED {
        files_under(&Path::new(ROOT).join(place), &mut files);
    }
    let mut cited = 0;
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(ROOT)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // This file spells out the rules, with examples of what it refuses.
        if rel == "tests/docs.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not text
        };
        cited += text.matches('§').count();
        found.extend(problems(&rel, &text, &heads));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The code does cite the docs: a scan that found nothing would prove nothing.
    assert!(cited > 50, "only {cited} citations found");
}

#[test]
fn the_checker_refuses_what_it_should() {
    let heads = headings();
    let cases = [
        ("// see docs/ARCHITECTURE.md §\"Money\"", 0),
        ("// docs/ARCHITECTURE.md §\"Money\", §\"Idle runs\"", 0),
        ("// docs/ARCHITECTURE.md §\"Moneys\"", 1),
        ("// §\"Money\" with no document", 1),
        ("// docs/ARCHITECTURE.md §6", 1),
        ("// DESIGN.md §6", 2),
        ("// docs/PROVIDERS.md §\"Money\"", 1),
    ];
    for (text, want) in cases {
        assert_eq!(
            problems("src/x.rs", text, &heads).len(),
            want,
            "{text}: {:?}",
            problems("src/x.rs", text, &heads)
        );
    }
}
