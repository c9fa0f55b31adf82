//! Read queries over the ledger, each on a connection of its own (never the writer's).
//!
//! Rows from the file are untrusted: a column that does not parse becomes a
//! [`LedgerError::Corrupt`] naming the run, never a panic.

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde_json::Value;
use std::path::Path;

use super::LedgerError;
use super::records::Basis;
use super::records::{
    BudgetSessionRecord, DecisionRecord, EventRecord, RunRecord, TurnRecord, UsageRecord,
};
use super::schema;
use crate::UnixMillis;
use crate::run_state::RunState;
use std::collections::BTreeMap;

/// A read-only view of the ledger file.
pub struct LedgerReader {
    pub(super) conn: Connection,
    /// Whether the file keeps running totals ([`schema::RUNNING_TOTALS`]): a file no
    /// owner has migrated yet is summed from its rows instead (reading never migrates).
    totals: bool,
    /// Whether the file has the search index ([`schema::SEARCH_INDEX`]).
    pub(super) search_index: bool,
    /// Whether its turns keep their evidence ([`schema::TURN_EVIDENCE`]).
    turn_evidence: bool,
    /// Whether it keeps spend's running totals ([`schema::SPEND_TOTALS`]).
    pub(super) spend_totals: bool,
}

const RUN_COLUMNS: &str = "run_id, created_at, updated_at, finished_at, state, completion_reason,
    provider, model, title, budget_session, workflow_id, parent_run, idempotency_key,
    provider_session_id, removed, spec_json, live_state_json, result_json, workspace_json";

impl LedgerReader {
    /// Opens a read-only connection. The file must exist and carry a schema this build
    /// knows.
    pub fn open(path: &Path) -> Result<LedgerReader, LedgerError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > schema::current_version() {
            return Err(LedgerError::TooNew {
                found: version,
                known: schema::current_version(),
            });
        }
        Ok(LedgerReader {
            conn,
            totals: version >= schema::RUNNING_TOTALS,
            search_index: version >= schema::SEARCH_INDEX,
            turn_evidence: version >= schema::TURN_EVIDENCE,
            spend_totals: version >= schema::SPEND_TOTALS,
        })
    }

    /// The processes the runs' children started, as an owner noted them (what a dead
    /// owner left is ended from this: [`crate::control::warden`], `ledger::recovery`).
    pub fn noted_processes(&self) -> Result<Vec<crate::providers::sweep::LeftOver>, LedgerError> {
        super::recovery::noted_processes(&self.conn)
    }

    /// The run with id `run_id`, removed or not; `None` when there is no such row.
    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>, LedgerError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1");
        let raw = self
            .conn
            .query_row(&sql, params![run_id], RawRun::from_row)
            .optional()?;
        raw.map(RawRun::into_record).transpose()
    }

    /// Runs, newest first; `include_removed` keeps runs the user removed from the trays.
    pub fn runs(&self, include_removed: bool) -> Result<Vec<RunRecord>, LedgerError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE (?1 OR removed = 0)
             ORDER BY created_at DESC, run_id DESC"
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let raws = st
            .query_map(params![include_removed], RawRun::from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        raws.into_iter().map(RawRun::into_record).collect()
    }

    /// Runs whose state is active (not finished), newest first.
    pub fn active_runs(&self) -> Result<Vec<RunRecord>, LedgerError> {
        // Only the active rows are read (through the state index): reading every run and
        // keeping the active ones parsed each finished run's spec too, hundreds of MB
        // and seconds at an owner's start on a long history.
        let states = crate::run_state::RunState::ALL
            .iter()
            .filter(|s| s.is_active())
            .map(|s| format!("'{}'", s.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE state IN ({states})
             ORDER BY created_at DESC, run_id DESC"
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let raws = st
            .query_map([], RawRun::from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        raws.into_iter().map(RawRun::into_record).collect()
    }

    /// The run holding this idempotency key created at or after `since`.
    pub fn run_by_idempotency_key(
        &self,
        key: &str,
        since: UnixMillis,
    ) -> Result<Option<RunRecord>, LedgerError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE idempotency_key = ?1 AND created_at >= ?2
             ORDER BY created_at DESC LIMIT 1"
        );
        let raw = self
            .conn
            .query_row(&sql, params![key, since], RawRun::from_row)
            .optional()?;
        raw.map(RawRun::into_record).transpose()
    }

    /// A run's events in seq order, from `after_seq` (exclusive).
    pub fn events(&self, run_id: &str, after_seq: u64) -> Result<Vec<EventRecord>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT run_id, seq, kind, at, body_json FROM events
             WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
        )?;
        let rows = st
            .query_map(params![run_id, after_seq as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(run_id, seq, kind, at, body)| {
                let body = parse_json(&run_id, "events.body_json", &body)?;
                Ok(EventRecord {
                    run_id,
                    seq: seq as u64,
                    kind,
                    at,
                    body,
                })
            })
            .collect()
    }

    /// A run's events of the given kinds, in seq order.
    pub fn events_of_kinds(
        &self,
        run_id: &str,
        kinds: &[&str],
    ) -> Result<Vec<EventRecord>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT seq, kind, at, body_json FROM events
             WHERE run_id = ?1 AND kind IN (SELECT value FROM json_each(?2)) ORDER BY seq",
        )?;
        let kinds = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".to_string());
        let rows = st
            .query_map(params![run_id, kinds], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(seq, kind, at, body)| {
                let body = parse_json(run_id, "events.body_json", &body)?;
                Ok(EventRecord {
                    run_id: run_id.to_string(),
                    seq: seq as u64,
                    kind,
                    at,
                    body,
                })
            })
            .collect()
    }

    /// The highest event seq of a run (0 when it has none).
    pub fn last_seq(&self, run_id: &str) -> Result<u64, LedgerError> {
        let seq: i64 = self.conn.query_row(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?1",
            params![run_id],
            |r| r.get(0),
        )?;
        Ok(seq as u64)
    }

    /// When the newest run was created (`None` for an empty ledger).
    pub fn newest_run_at(&self) -> Result<Option<UnixMillis>, LedgerError> {
        Ok(self
            .conn
            .query_row("SELECT MAX(created_at) FROM runs", [], |r| r.get(0))?)
    }

    /// The run's turns, in order.
    pub fn turns(&self, run_id: &str) -> Result<Vec<TurnRecord>, LedgerError> {
        // A file no owner has migrated yet has no evidence column (reading never migrates).
        let mut st = self.conn.prepare_cached(if self.turn_evidence {
            "SELECT run_id, number, origin, started_at, ended_at, prompt_preview, text,
                usage_json, cost_usd, result_json, evidence_json
             FROM turns WHERE run_id = ?1 ORDER BY number"
        } else {
            "SELECT run_id, number, origin, started_at, ended_at, prompt_preview, text,
                usage_json, cost_usd, result_json, NULL
             FROM turns WHERE run_id = ?1 ORDER BY number"
        })?;
        type Raw = (
            String,
            u32,
            String,
            i64,
            Option<i64>,
            String,
            Option<String>,
            Option<String>,
            Option<f64>,
            Option<String>,
            Option<String>,
        );
        let rows: Vec<Raw> = st
            .query_map(params![run_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(
                |(
                    run_id,
                    number,
                    origin,
                    started_at,
                    ended_at,
                    preview,
                    text,
                    usage,
                    cost,
                    result,
                    evidence,
                )| {
                    Ok(TurnRecord {
                        usage: parse_opt_json(&run_id, "turns.usage_json", usage)?,
                        result: parse_opt_json(&run_id, "turns.result_json", result)?,
                        evidence: parse_opt_json(&run_id, "turns.evidence_json", evidence)?,
                        run_id,
                        number,
                        origin,
                        started_at,
                        ended_at,
                        prompt_preview: preview,
                        text,
                        cost_usd: cost,
                    })
                },
            )
            .collect()
    }

    /// Usage rows of one run, or of every run when `run_id` is `None`.
    pub fn usage(&self, run_id: Option<&str>) -> Result<Vec<UsageRecord>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT run_id, turn, at, provider, model, part, input, output, reasoning,
                cache_read, cache_write, cost_usd, basis, fidelity, source, budget_session
             FROM usage WHERE (?1 IS NULL OR run_id = ?1) ORDER BY id",
        )?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok(UsageRecord {
                    run_id: r.get(0)?,
                    turn: r.get(1)?,
                    at: r.get(2)?,
                    provider: r.get(3)?,
                    model: r.get(4)?,
                    part: r.get(5)?,
                    input: r.get::<_, i64>(6)?.max(0) as u64,
                    output: r.get::<_, i64>(7)?.max(0) as u64,
                    reasoning: r.get::<_, i64>(8)?.max(0) as u64,
                    cache_read: r.get::<_, i64>(9)?.max(0) as u64,
                    cache_write: r.get::<_, i64>(10)?.max(0) as u64,
                    cost_usd: r.get(11)?,
                    basis: r.get(12)?,
                    fidelity: r.get(13)?,
                    source: r.get(14)?,
                    budget_session: r.get(15)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// The run's decisions, oldest first.
    pub fn decisions(&self, run_id: &str) -> Result<Vec<DecisionRecord>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT run_id, at, kind, request_id, who, decision, body_json
             FROM decisions WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = st
            .query_map(params![run_id], |r| {
                Ok((
                    r.get::<_, Option<String>>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(run, at, kind, request_id, who, decision, body)| {
                Ok(DecisionRecord {
                    body: parse_json(run.as_deref().unwrap_or("-"), "decisions.body_json", &body)?,
                    run_id: run,
                    at,
                    kind,
                    request_id,
                    who,
                    decision,
                })
            })
            .collect()
    }

    /// The budget session named `name`; `None` when it was never made.
    pub fn budget_session(&self, name: &str) -> Result<Option<BudgetSessionRecord>, LedgerError> {
        Ok(self
            .conn
            .query_row(
                "SELECT name, created_at, warning_usd, hard_cap_usd FROM budget_sessions
                 WHERE name = ?1",
                params![name],
                |r| {
                    Ok(BudgetSessionRecord {
                        name: r.get(0)?,
                        created_at: r.get(1)?,
                        warning_usd: r.get(2)?,
                        hard_cap_usd: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// Every approval rule, oldest first.
    pub fn rules(&self) -> Result<Vec<crate::rules::Rule>, LedgerError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id, rule_json FROM rules ORDER BY id")?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(id, text)| {
                let value = parse_json("-", "rules.rule_json", &text)?;
                let mut rule: crate::rules::Rule = serde_json::from_value(value)?;
                rule.id = id as u64;
                Ok(rule)
            })
            .collect()
    }

    /// Every repository script approved (the latest of each repository and kind).
    pub fn script_approvals(
        &self,
    ) -> Result<Vec<crate::workspace::scripts::ApprovedScript>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT repository, kind, sha256, script, approved_at FROM script_approvals
             ORDER BY repository, kind",
        )?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        // A kind this build does not know is left out.
        Ok(rows
            .into_iter()
            .filter_map(|(repository, kind, sha256, text, approved_at)| {
                Some(crate::workspace::scripts::ApprovedScript {
                    repository,
                    kind: crate::workspace::scripts::ScriptKind::parse(&kind)?,
                    sha256,
                    text,
                    approved_at,
                })
            })
            .collect())
    }

    /// The value kept under `key` in the `meta` table; `None` when there is none.
    pub fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// One page of runs (see [`RunsPage`]): every active run matching the filters
    /// (unless the page starts `before` a run), then finished runs newest-finished first,
    /// at most `limit` of them. `None` when `before` names no run.
    pub fn runs_page(&self, page: &RunsPage<'_>) -> Result<Option<Vec<RunRecord>>, LedgerError> {
        let cursor: Option<(i64, String)> = match page.before {
            Some(id) => {
                let found = self
                    .conn
                    .query_row(
                        "SELECT COALESCE(finished_at, 9223372036854775807), run_id FROM runs
                         WHERE run_id = ?1",
                        params![id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                match found {
                    Some(c) => Some(c),
                    None => return Ok(None),
                }
            }
            None => None,
        };
        let needle = page
            .search
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty());
        let filters = "(?1 OR removed = 0)
            AND (?2 IS NULL OR state = ?2)
            AND (?3 IS NULL OR workflow_id = ?3)
            AND (?4 IS NULL OR instr(lower(title || ' ' || run_id || ' ' || provider || ' '
                 || COALESCE(model, '') || ' ' || state), ?4) > 0)";
        let state = page.state.map(|s| s.as_str());
        let mut out = Vec::new();
        if cursor.is_none() {
            let sql = format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE finished_at IS NULL AND {filters}
                 ORDER BY created_at DESC, run_id DESC"
            );
            let mut st = self.conn.prepare_cached(&sql)?;
            let raws = st
                .query_map(
                    params![page.include_removed, state, page.workflow, needle],
                    RawRun::from_row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            for raw in raws {
                out.push(raw.into_record()?);
            }
        }
        let (after_at, after_id) = cursor.unwrap_or((i64::MAX, String::new()));
        let unbounded = page.before.is_none();
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs INDEXED BY runs_by_finished_page
             WHERE finished_at IS NOT NULL AND {filters}
               AND (?5 OR finished_at < ?6 OR (finished_at = ?6 AND run_id < ?7))
             ORDER BY finished_at DESC, run_id DESC LIMIT ?8"
        );
        let mut st = self.conn.prepare_cached(&sql)?;
        let limit = page.limit.map_or(-1, i64::from);
        let raws = st
            .query_map(
                params![
                    page.include_removed,
                    state,
                    page.workflow,
                    needle,
                    unbounded,
                    after_at,
                    after_id,
                    limit
                ],
                RawRun::from_row,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        for raw in raws {
            out.push(raw.into_record()?);
        }
        Ok(Some(out))
    }

    /// Each of these runs' spend (the sum of its priced usage rows).
    pub fn spend_of(
        &self,
        run_ids: &[&str],
    ) -> Result<std::collections::HashMap<String, f64>, LedgerError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT COALESCE(SUM(cost_usd), 0.0) FROM usage WHERE run_id = ?1")?;
        let mut out = std::collections::HashMap::with_capacity(run_ids.len());
        for id in run_ids {
            let spent: f64 = st.query_row(params![id], |r| r.get(0))?;
            out.insert((*id).to_string(), spent);
        }
        Ok(out)
    }

    /// A budget session's money from the ledger's running totals (kept with each usage
    /// row, see the schema's migration 6): one row read, whatever the history's size.
    pub fn session_totals(&self, session: &str) -> Result<SessionTotals, LedgerError> {
        if !self.totals {
            return self.session_totals_from_rows(session);
        }
        let (spent_usd, usage_rows): (f64, i64) = self
            .conn
            .query_row(
                "SELECT spent_usd, usage_rows FROM session_money WHERE budget_session = ?1",
                params![session],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .unwrap_or((0.0, 0));
        let mut st = self.conn.prepare_cached(
            "SELECT weakest, runs FROM session_basis_runs
             WHERE budget_session = ?1 AND runs > 0 ORDER BY weakest",
        )?;
        let runs_by_weakest = st
            .query_map(params![session], |r| {
                Ok((
                    Basis::from_rank(r.get(0)?),
                    r.get::<_, i64>(1)?.max(0) as u64,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionTotals {
            spent_usd,
            usage_rows: usage_rows.max(0) as u64,
            runs_by_weakest,
        })
    }

    /// The session's runs whose weakest basis is `basis`: the newest `limit` of them
    /// (run ids sort by creation), newest first.
    pub fn session_runs_of_weakest(
        &self,
        session: &str,
        basis: Basis,
        limit: usize,
    ) -> Result<Vec<String>, LedgerError> {
        if !self.totals {
            let weakest = self.weakest_from_rows(session)?;
            return Ok(weakest
                .into_iter()
                .rev()
                .filter(|(_, b)| *b == basis)
                .map(|(id, _)| id)
                .take(limit)
                .collect());
        }
        let mut st = self.conn.prepare_cached(
            "SELECT run_id FROM session_run_basis INDEXED BY session_run_basis_by_weakest
             WHERE budget_session = ?1 AND weakest = ?2 ORDER BY run_id DESC LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids = st
            .query_map(params![session, basis.rank(), limit], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    }

    /// [`LedgerReader::session_totals`] summed from the usage rows, for a file from
    /// before the running totals.
    fn session_totals_from_rows(&self, session: &str) -> Result<SessionTotals, LedgerError> {
        let (spent_usd, usage_rows): (f64, i64) = self.conn.query_row(
            "SELECT COALESCE(SUM(cost_usd), 0.0), COUNT(*) FROM usage WHERE budget_session = ?1",
            params![session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut runs: BTreeMap<Basis, u64> = BTreeMap::new();
        for (_, basis) in self.weakest_from_rows(session)? {
            *runs.entry(basis).or_default() += 1;
        }
        Ok(SessionTotals {
            spent_usd,
            usage_rows: usage_rows.max(0) as u64,
            runs_by_weakest: runs.into_iter().collect(),
        })
    }

    /// Each of the session's runs with its weakest basis ([`Basis::weakest`] over its
    /// rows' words), by id, from the usage rows.
    fn weakest_from_rows(&self, session: &str) -> Result<BTreeMap<String, Basis>, LedgerError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT DISTINCT run_id, basis FROM usage WHERE budget_session = ?1")?;
        let rows = st
            .query_map(params![session], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut weakest: BTreeMap<String, Basis> = BTreeMap::new();
        for (run_id, word) in rows {
            let basis = Basis::parse(&word);
            let w = weakest.entry(run_id).or_insert(basis);
            *w = Basis::weakest([*w, basis]);
        }
        Ok(weakest)
    }

    /// The body of a run's last event of `kind` (`None` when it has none).
    pub fn last_event_of_kind(
        &self,
        run_id: &str,
        kind: &str,
    ) -> Result<Option<Value>, LedgerError> {
        let body: Option<String> = self
            .conn
            .query_row(
                "SELECT body_json FROM events WHERE run_id = ?1 AND kind = ?2
                 ORDER BY seq DESC LIMIT 1",
                params![run_id, kind],
                |r| r.get(0),
            )
            .optional()?;
        body.map(|b| parse_json(run_id, "events.body_json", &b))
            .transpose()
    }

    /// A run's events of one kind, in seq order.
    pub fn events_of_kind(
        &self,
        run_id: &str,
        kind: &str,
    ) -> Result<Vec<EventRecord>, LedgerError> {
        self.events_of_kinds(run_id, &[kind])
    }

    /// When retention last pruned this run's events (`None`: never).
    pub fn events_pruned_at(&self, run_id: &str) -> Result<Option<UnixMillis>, LedgerError> {
        Ok(self
            .conn
            .query_row(
                "SELECT events_pruned_at FROM runs WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    /// The repositories of every worktree run on this machine (each once): a worktree on
    /// a host has its repository there, not pruned from here (docs/ARCHITECTURE.md
    /// §"Hosts").
    pub fn worktree_checkouts(&self) -> Result<Vec<String>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT DISTINCT json_extract(workspace_json, '$.checkout') FROM runs
             INDEXED BY runs_by_checkout
             WHERE workspace_json IS NOT NULL
               AND json_extract(workspace_json, '$.checkout') IS NOT NULL
               AND json_extract(workspace_json, '$.mode') = 'worktree'
               AND json_extract(workspace_json, '$.host') IS NULL",
        )?;
        let rows = st
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(rows)
    }

    /// How many runs the ledger holds, and how many of them are finished (from the
    /// running counts).
    pub fn run_counts(&self) -> Result<(u64, u64), LedgerError> {
        let sql = match self.totals {
            true => {
                "SELECT COALESCE(SUM(runs), 0), COALESCE(SUM(CASE WHEN finished THEN runs END), 0)
                 FROM run_counts"
            }
            false => "SELECT COUNT(*), COUNT(finished_at) FROM runs",
        };
        let (total, finished): (i64, i64) = self
            .conn
            .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((total.max(0) as u64, finished.max(0) as u64))
    }

    /// How many runs are in each state (removed ones too when `include_removed`), by
    /// state word, from the running counts; states with no run are left out.
    pub fn runs_by_state(
        &self,
        include_removed: bool,
    ) -> Result<Vec<(RunState, u64)>, LedgerError> {
        let mut st = self.conn.prepare_cached(match self.totals {
            true => {
                "SELECT state, SUM(runs) FROM run_counts WHERE (?1 OR removed = 0)
                 GROUP BY state HAVING SUM(runs) > 0 ORDER BY state"
            }
            false => {
                "SELECT state, COUNT(*) FROM runs WHERE (?1 OR removed = 0)
                 GROUP BY state ORDER BY state"
            }
        })?;
        let rows = st
            .query_map(params![include_removed], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(state, n)| {
                let parsed = RunState::parse(&state).ok_or_else(|| LedgerError::Corrupt {
                    run_id: "-".into(),
                    what: format!("run_counts: unknown run state {state:?}"),
                })?;
                Ok((parsed, n.max(0) as u64))
            })
            .collect()
    }

    /// Finished runs whose events are due for pruning: finished before `cutoff` and not
    /// pruned since, after `from` in (finished_at, run_id) order, at most `limit`.
    pub fn events_to_prune(
        &self,
        cutoff: UnixMillis,
        from: &(i64, String),
        limit: usize,
    ) -> Result<Vec<(i64, String)>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT finished_at, run_id FROM runs INDEXED BY runs_by_finished_page
             WHERE finished_at IS NOT NULL AND finished_at < ?1
               AND (finished_at > ?2 OR (finished_at = ?2 AND run_id > ?3))
               AND (events_pruned_at IS NULL OR events_pruned_at < finished_at)
             ORDER BY finished_at, run_id LIMIT ?4",
        )?;
        let rows = st
            .query_map(params![cutoff, from.0, from.1, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Finished runs beyond the newest `keep`, oldest first. A run whose worktree is still
    /// there is never among them: deleting its row would lose track of its work.
    pub fn finished_beyond(&self, keep: u32) -> Result<Vec<String>, LedgerError> {
        let mut st = self.conn.prepare_cached(
            "SELECT run_id FROM runs WHERE finished_at IS NOT NULL
               AND (workspace_json IS NULL
                    OR json_extract(workspace_json, '$.mode') IS NOT 'worktree'
                    OR json_extract(workspace_json, '$.status') NOT IN ('ready', 'preparing'))
             ORDER BY finished_at DESC, run_id DESC LIMIT -1 OFFSET ?1",
        )?;
        let ids = st
            .query_map(params![keep], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(ids.into_iter().rev().collect())
    }
}

/// A budget session's money as the ledger's running totals hold it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionTotals {
    /// The sum of its usage rows' cost (an unpriced row adds nothing).
    pub spent_usd: f64,
    /// How many usage rows it has.
    pub usage_rows: u64,
    /// How many of its runs have each weakest basis, weakest first (none left out).
    pub runs_by_weakest: Vec<(Basis, u64)>,
}

/// Which runs one page holds (see [`LedgerReader::runs_page`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunsPage<'a> {
    /// Keep runs the user removed from the trays.
    pub include_removed: bool,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs of this workflow.
    pub workflow: Option<&'a str>,
    /// Text the title, id, provider, model or state contains (case-insensitive).
    pub search: Option<&'a str>,
    /// Finished runs at most (`None`: all).
    pub limit: Option<u32>,
    /// Only finished runs that finished before this one did (the next page after it).
    pub before: Option<&'a str>,
}

/// A `runs` row before its JSON columns are parsed.
pub(super) struct RawRun {
    run_id: String,
    created_at: i64,
    updated_at: i64,
    finished_at: Option<i64>,
    state: String,
    completion_reason: Option<String>,
    provider: String,
    model: Option<String>,
    title: String,
    budget_session: String,
    workflow_id: Option<String>,
    parent_run: Option<String>,
    idempotency_key: Option<String>,
    provider_session_id: Option<String>,
    removed: bool,
    spec_json: String,
    live_state_json: Option<String>,
    result_json: Option<String>,
    workspace_json: Option<String>,
}

impl RawRun {
    pub(super) fn from_row(r: &Row<'_>) -> rusqlite::Result<RawRun> {
        Ok(RawRun {
            run_id: r.get(0)?,
            created_at: r.get(1)?,
            updated_at: r.get(2)?,
            finished_at: r.get(3)?,
            state: r.get(4)?,
            completion_reason: r.get(5)?,
            provider: r.get(6)?,
            model: r.get(7)?,
            title: r.get(8)?,
            budget_session: r.get(9)?,
            workflow_id: r.get(10)?,
            parent_run: r.get(11)?,
            idempotency_key: r.get(12)?,
            provider_session_id: r.get(13)?,
            removed: r.get(14)?,
            spec_json: r.get(15)?,
            live_state_json: r.get(16)?,
            result_json: r.get(17)?,
            workspace_json: r.get(18)?,
        })
    }

    pub(super) fn into_record(self) -> Result<RunRecord, LedgerError> {
        let state = RunState::parse(&self.state).ok_or_else(|| LedgerError::Corrupt {
            run_id: self.run_id.clone(),
            what: format!("unknown run state {:?}", self.state),
        })?;
        let live_state = match &self.live_state_json {
            Some(text) => Some(
                serde_json::from_str(text).map_err(|e| LedgerError::Corrupt {
                    run_id: self.run_id.clone(),
                    what: format!("runs.live_state_json: {e}"),
                })?,
            ),
            None => None,
        };
        Ok(RunRecord {
            spec: parse_json(&self.run_id, "runs.spec_json", &self.spec_json)?,
            result: parse_opt_json(&self.run_id, "runs.result_json", self.result_json)?,
            workspace: parse_opt_json(&self.run_id, "runs.workspace_json", self.workspace_json)?,
            live_state,
            state,
            run_id: self.run_id,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
            completion_reason: self.completion_reason,
            provider: self.provider,
            model: self.model,
            title: self.title,
            budget_session: self.budget_session,
            workflow_id: self.workflow_id,
            parent_run: self.parent_run,
            idempotency_key: self.idempotency_key,
            provider_session_id: self.provider_session_id,
            removed: self.removed,
        })
    }
}

fn parse_json(run_id: &str, column: &str, text: &str) -> Result<Value, LedgerError> {
    serde_json::from_str(text).map_err(|e| LedgerError::Corrupt {
        run_id: run_id.to_string(),
        what: format!("{column}: {e}"),
    })
}

fn parse_opt_json(
    run_id: &str,
    column: &str,
    text: Option<String>,
) -> Result<Option<Value>, LedgerError> {
    text.map(|t| parse_json(run_id, column, &t)).transpose()
}
