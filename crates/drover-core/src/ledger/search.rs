//! Searching everything the ledger holds (docs/ARCHITECTURE.md §"Ledger"): each run's
//! task, follow-ups and results, its agent text (one document a turn, from its end) and
//! its transcript's tool calls, through the FTS5 index migrations 8, 9 and 12 keep in the
//! transactions that write the rows: by triggers, a tool call by the writer as it appends
//! the call's event ([`index_tool_call`]), and a turn's agent text by the writer when it
//! records the turn's end ([`index_turn_text`]).
//!
//! What must stay true:
//! - the index holds no copy of the text: a hit's text is read back from its row with the
//!   same SQL the triggers indexed it with (the `search_*` macros of `schema`), so the
//!   line shown is the one that matched; a turn's agent text is read back from its events,
//!   whose texts, one per line, are what the dispatcher handed the writer (up to its
//!   bound: the text read back holds what was indexed);
//! - a query FTS5 cannot parse is the user's mistake ([`LedgerError::SearchQuery`]),
//!   never a ledger failure; the work is bounded by the limit whatever the history size
//!   (newest runs first, read from the end of the index).

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::schema::{search_result_text, search_turn_bounds, search_turn_text};
use super::{LedgerError, LedgerReader};
use crate::UnixMillis;
use crate::run_state::RunState;

/// Hits a search returns at most, whatever it asks.
pub const SEARCH_LIMIT_MAX: u32 = 500;
/// Hits a search returns when it does not say.
pub const SEARCH_LIMIT_DEFAULT: u32 = 50;

/// The low 32 bits of a document's rowid from this one up are a turn's: 4 × its number,
/// + 0 for its follow-up, + 1 for its agent text, + 2 for its result (see migration 8).
const TURN_SLOTS: i64 = 1 << 31;
/// The words of the line shown around the match.
const SNIPPET_TOKENS: i64 = 24;
/// What marks a match in FTS5's snippet before it is turned into ranges (control
/// characters, which no line read back keeps: `text::one_line` drops them).
const OPEN: char = '\u{2}';
const CLOSE: char = '\u{3}';

/// Where a hit's text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchSource {
    /// The run's task.
    Task,
    /// A follow-up the user sent (its turn's prompt, at most 200 characters).
    FollowUp,
    /// The agent's text in a turn (all of it, once the turn's end is recorded).
    Text,
    /// A tool call in the transcript: the tool and its command, file, address or subject.
    Tool,
    /// A turn's result: its summary, question and changes (or its JSON answer).
    Result,
}

impl SearchSource {
    /// The source's word (`task`, `follow_up`, `text`, `tool`, `result`).
    pub fn as_str(self) -> &'static str {
        match self {
            SearchSource::Task => "task",
            SearchSource::FollowUp => "follow_up",
            SearchSource::Text => "text",
            SearchSource::Tool => "tool",
            SearchSource::Result => "result",
        }
    }
}

/// One line of a run that matched a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The run.
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its state now.
    pub state: RunState,
    /// When the line was written (the run's dispatch for its task, a turn's start for a
    /// follow-up and its end for its agent text and result, a tool call's event), in ms
    /// since the Unix epoch.
    pub at: UnixMillis,
    /// Where the line comes from.
    pub source: SearchSource,
    /// The turn of a follow-up, agent text or result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The event's seq of a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The words around the match, on one line (`…` where it was cut).
    pub line: String,
    /// The matched words in `line`: byte ranges, start inclusive, end exclusive, in order.
    pub marks: Vec<(usize, usize)>,
}

impl SearchHit {
    /// `line` with each match between `open` and `close`.
    pub fn marked(&self, open: &str, close: &str) -> String {
        let mut out = String::with_capacity(self.line.len() + 8);
        let mut at = 0;
        for &(start, end) in &self.marks {
            let (Some(before), Some(word)) = (self.line.get(at..start), self.line.get(start..end))
            else {
                continue;
            };
            out.push_str(before);
            out.push_str(open);
            out.push_str(word);
            out.push_str(close);
            at = end;
        }
        out.push_str(self.line.get(at..).unwrap_or_default());
        out
    }
}

/// The tokenizer of the index, and of the snippets made from it.
const TOKENIZE: &str = "unicode61 remove_diacritics 2";

/// A hit found in the index, before its line is made.
struct Found {
    hit: SearchHit,
    text: String,
}

impl LedgerReader {
    /// The lines matching `query` (FTS5's query syntax: words, `"phrases"`, `prefix*`,
    /// `AND`/`OR`/`NOT`, `NEAR(…)`), newest runs first and, within a run, latest first; at
    /// most `limit` (at most [`SEARCH_LIMIT_MAX`]).
    pub fn search(&self, query: &str, limit: u32) -> Result<Vec<SearchHit>, LedgerError> {
        if !self.search_index {
            return Err(LedgerError::NoSearchIndex);
        }
        let limit = limit.clamp(1, SEARCH_LIMIT_MAX);
        let rowids: Vec<i64> = {
            let mut st = self.conn.prepare_cached(
                "SELECT rowid FROM search WHERE search MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
            )?;
            st.query_map(params![query, limit], |r| r.get(0))
                .map_err(query_error)?
                .collect::<Result<_, _>>()
                .map_err(query_error)?
        };
        let mut found = Vec::with_capacity(rowids.len());
        for rowid in rowids {
            if let Some(f) = self.read_hit(rowid)? {
                found.push(f);
            }
        }
        snippets(query, found)
    }

    /// The run, time and text of the document `rowid`; `None` when its row is gone.
    fn read_hit(&self, rowid: i64) -> Result<Option<Found>, LedgerError> {
        let (n, slot) = (rowid >> 32, rowid & 0xFFFF_FFFF);
        let run = self
            .conn
            .prepare_cached(
                "SELECT r.run_id, r.title, r.state, r.created_at, r.spec_json ->> '$.task'
                 FROM search_runs s JOIN runs r USING (run_id) WHERE s.n = ?1",
            )?
            .query_row(params![n], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<String>>(4)?,
                ))
            })
            .optional()?;
        let Some((run_id, title, state, created_at, task)) = run else {
            return Ok(None);
        };
        let state = RunState::parse(&state).ok_or_else(|| LedgerError::Corrupt {
            run_id: run_id.clone(),
            what: format!("unknown run state {state:?}"),
        })?;
        let (at, source, turn, seq, text) = if slot == 0 {
            (created_at, SearchSource::Task, None, None, task)
        } else if slot < TURN_SLOTS {
            let row = self
                .conn
                .prepare_cached(
                    "SELECT at, body_json ->> '$.line' FROM events WHERE run_id = ?1 AND seq = ?2",
                )?
                .query_row(params![run_id, slot], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
                })
                .optional()?;
            let Some((at, text)) = row else {
                return Ok(None);
            };
            (at, SearchSource::Tool, None, u64::try_from(slot).ok(), text)
        } else {
            let number = (slot - TURN_SLOTS) / 4;
            let row = self
                .conn
                .prepare_cached(concat!(
                    "SELECT started_at, ended_at, prompt_preview, ",
                    search_result_text!("result_json"),
                    " FROM turns WHERE run_id = ?1 AND number = ?2"
                ))?
                .query_row(params![run_id, number], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })
                .optional()?;
            let Some((started_at, ended_at, prompt, result_text)) = row else {
                return Ok(None);
            };
            let turn = u32::try_from(number).ok();
            let ended = ended_at.unwrap_or(started_at);
            match (slot - TURN_SLOTS) % 4 {
                0 => (started_at, SearchSource::FollowUp, turn, None, Some(prompt)),
                1 => {
                    let text = self
                        .conn
                        .prepare_cached(concat!("SELECT ", search_turn_text!("?1", "?2")))?
                        .query_row(params![run_id, number], |r| r.get::<_, Option<String>>(0))?;
                    (ended, SearchSource::Text, turn, None, text)
                }
                _ => (ended, SearchSource::Result, turn, None, result_text),
            }
        };
        Ok(Some(Found {
            hit: SearchHit {
                run_id,
                title,
                state,
                at,
                source,
                turn,
                seq,
                line: String::new(),
                marks: Vec::new(),
            },
            text: crate::text::one_line(&text.unwrap_or_default()),
        }))
    }
}

/// Whether the ledger has the search index (a ledger always does; a benchmark drops it
/// to time what it costs).
pub(super) fn has_index(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'search'",
        [],
        |_| Ok(()),
    )
    .optional()
    .ok()
    .flatten()
    .is_some()
}

/// Indexes the line of the tool call appended as event `seq` of `run_id` (its body
/// `body_json`), as migration 8's trigger did and the reader reads it back: the body's
/// `line` (docs/ARCHITECTURE.md §"Ledger", migration 12).
pub(super) fn index_tool_call(
    conn: &Connection,
    run_id: &str,
    seq: u64,
    body_json: &str,
) -> Result<(), LedgerError> {
    conn.prepare_cached(
        "INSERT INTO search (rowid, text)
         SELECT (n << 32) | ?2, ?3 ->> '$.line' FROM search_runs WHERE run_id = ?1",
    )?
    .execute(params![run_id, seq as i64, body_json])?;
    Ok(())
}

/// Indexes the agent text of turn `number` of `run_id`, whose end was just recorded, as
/// one document (docs/ARCHITECTURE.md §"Ledger"): `text` as its writer gathered it from
/// the turn's events (nothing when empty), or, when `None`, read from those events. The
/// turn's earlier document goes first when `replace` (it had one: its end was recorded
/// before). Public for what fills a ledger by hand as the writer would (the search bench).
pub fn index_turn_text(
    conn: &Connection,
    run_id: &str,
    number: u32,
    replace: bool,
    text: Option<&str>,
) -> Result<(), LedgerError> {
    if replace {
        conn.prepare_cached(
            "DELETE FROM search WHERE rowid = (
                SELECT (n << 32) | (2147483649 + 4 * ?2) FROM search_runs WHERE run_id = ?1)",
        )?
        .execute(params![run_id, number])?;
    }
    match text {
        Some("") => {}
        Some(text) => {
            conn.prepare_cached(
                "INSERT INTO search (rowid, text)
                 SELECT (n << 32) | (2147483649 + 4 * ?2), ?3 FROM search_runs WHERE run_id = ?1",
            )?
            .execute(params![run_id, number, text])?;
        }
        None => {
            conn.prepare_cached(concat!(
                "INSERT INTO search (rowid, text) SELECT id, text FROM (
                    SELECT (n << 32) | (2147483649 + 4 * ?2) AS id, ",
                search_turn_text!("?1", "?2"),
                " AS text FROM search_runs WHERE run_id = ?1) WHERE text IS NOT NULL"
            ))?
            .execute(params![run_id, number])?;
        }
    }
    Ok(())
}

/// Each hit's line: FTS5's snippet of its text for `query`, made in an index of those few
/// texts alone (the ledger's index keeps no text to make it from).
fn snippets(query: &str, found: Vec<Found>) -> Result<Vec<SearchHit>, LedgerError> {
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE hits USING fts5(text, tokenize = '{TOKENIZE}')"
    ))?;
    {
        let mut insert = conn.prepare("INSERT INTO hits (rowid, text) VALUES (?1, ?2)")?;
        for (i, f) in found.iter().enumerate() {
            insert.execute(params![i as i64, f.text])?;
        }
    }
    let mut lines: Vec<Option<String>> = vec![None; found.len()];
    {
        let mut st = conn.prepare(
            "SELECT rowid, snippet(hits, 0, char(2), char(3), '…', ?2) FROM hits
             WHERE hits MATCH ?1",
        )?;
        let rows = st
            .query_map(params![query, SNIPPET_TOKENS], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(query_error)?;
        for row in rows {
            let (i, snippet) = row.map_err(query_error)?;
            if let Some(slot) = usize::try_from(i).ok().and_then(|i| lines.get_mut(i)) {
                *slot = Some(snippet);
            }
        }
    }
    Ok(found
        .into_iter()
        .zip(lines)
        .map(|(f, snippet)| {
            let (line, marks) = match snippet {
                Some(s) => unmark(&s),
                None => (crate::text::clip(&f.text, 200), Vec::new()),
            };
            SearchHit {
                line,
                marks,
                ..f.hit
            }
        })
        .collect())
}

/// A snippet's text and the byte ranges its marks enclosed.
fn unmark(snippet: &str) -> (String, Vec<(usize, usize)>) {
    let mut line = String::with_capacity(snippet.len());
    let mut marks = Vec::new();
    let mut start = None;
    for c in snippet.chars() {
        match c {
            OPEN => start = Some(line.len()),
            CLOSE => {
                if let Some(s) = start.take() {
                    marks.push((s, line.len()));
                }
            }
            c => line.push(c),
        }
    }
    (line, marks)
}

/// A failure of the MATCH itself: FTS5 could not read the query (SQLite's generic error;
/// anything else is the ledger's).
fn query_error(e: rusqlite::Error) -> LedgerError {
    match &e {
        rusqlite::Error::SqliteFailure(f, Some(message))
            if f.code == rusqlite::ErrorCode::Unknown =>
        {
            LedgerError::SearchQuery(message.clone())
        }
        _ => LedgerError::Sqlite(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_becomes_its_line_and_the_ranges_it_marked() {
        let (line, marks) = unmark("…deploy to \u{2}staging\u{3}-\u{2}eu\u{3} failed");
        assert_eq!(line, "…deploy to staging-eu failed");
        assert_eq!(&line[marks[0].0..marks[0].1], "staging");
        assert_eq!(&line[marks[1].0..marks[1].1], "eu");
        let hit = SearchHit {
            run_id: "r1".into(),
            title: "t".into(),
            state: RunState::Completed,
            at: 0,
            source: SearchSource::Text,
            turn: None,
            seq: Some(3),
            line,
            marks,
        };
        assert_eq!(hit.marked("[", "]"), "…deploy to [staging]-[eu] failed");
    }
}
