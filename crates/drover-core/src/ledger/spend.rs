//! Spend over time (docs/ARCHITECTURE.md §"Spend over time"): every usage row the
//! ledger holds, summed by day, week, model, provider, repository, workflow or tag, with
//! each basis kept apart — dollars the provider reported, dollars drover estimated from the
//! catalog, and rows that could not be priced (counted, never booked as $0).
//!
//! What must stay true: a call reads the running totals the ledger keeps (migration 13:
//! per grouping, group and local day, kept by a trigger in the transaction that writes
//! each usage row), a few rows a day whatever the history's size, and answers what one
//! aggregate over the usage rows answers ([`LedgerReader::spend_from_rows`]) — but for
//! runs deleted whole, whose money stays in the totals; a run counts once per group (on
//! its last day there); days and weeks are the machine's local calendar (SQLite's
//! `localtime`, which follows `TZ`), and a reader in another calendar than the one the
//! totals' days were written in sums the rows; by day with a `since`, every day from it
//! to today has its row, a day with no usage at zero.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{LedgerError, LedgerReader};
use crate::UnixMillis;

/// What spend is summed by.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SpendBy {
    /// The local calendar day of each usage row (`2026-12-03`).
    #[default]
    Day,
    /// The local calendar week, named by its Monday (`2026-11-30`).
    Week,
    /// The model the usage was reported for (`unknown` when none was).
    Model,
    /// The provider.
    Provider,
    /// The run's repository: the checkout its worktree came from, else its cwd.
    Repository,
    /// The run's workflow (`none` for runs of no workflow).
    Workflow,
    /// Each of the run's tags (a run with two tags counts in both; `none` for no tag).
    Tag,
}

impl SpendBy {
    /// Every grouping, in the order `--by` lists them.
    pub const ALL: [SpendBy; 7] = [
        SpendBy::Day,
        SpendBy::Week,
        SpendBy::Model,
        SpendBy::Provider,
        SpendBy::Repository,
        SpendBy::Workflow,
        SpendBy::Tag,
    ];

    /// The grouping's word (`day`, `week`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            SpendBy::Day => "day",
            SpendBy::Week => "week",
            SpendBy::Model => "model",
            SpendBy::Provider => "provider",
            SpendBy::Repository => "repository",
            SpendBy::Workflow => "workflow",
            SpendBy::Tag => "tag",
        }
    }

    /// Whether the rows are periods of time (listed oldest first), not names (listed by
    /// spend, largest first).
    pub fn is_time(self) -> bool {
        matches!(self, SpendBy::Day | SpendBy::Week)
    }

    /// The SQL that names each usage row's group (`u` is the usage row, `r` its run) and
    /// what it must join.
    fn key_sql(self) -> (&'static str, Joins) {
        match self {
            SpendBy::Day => ("date(u.at / 1000, 'unixepoch', 'localtime')", Joins::None),
            SpendBy::Week => (
                // The Monday on or before the day: `weekday 0` moves on to the Sunday,
                // six days back is its Monday.
                "date(u.at / 1000, 'unixepoch', 'localtime', 'weekday 0', '-6 days')",
                Joins::None,
            ),
            SpendBy::Model => ("COALESCE(u.model, 'unknown')", Joins::None),
            SpendBy::Provider => ("u.provider", Joins::None),
            SpendBy::Repository => (
                "COALESCE(r.workspace_json ->> '$.checkout', r.spec_json ->> '$.cwd', 'unknown')",
                Joins::Run,
            ),
            SpendBy::Workflow => ("COALESCE(r.workflow_id, 'none')", Joins::Run),
            SpendBy::Tag => ("COALESCE(t.value, 'none')", Joins::Tags),
        }
    }
}

/// Where spend starts: a local calendar day, or so many days before today (today being
/// day 0: `30d` is the last 31 days, `29d` the last 30 with today).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// From the start of this local day.
    Date(chrono::NaiveDate),
    /// From the start of the local day this many days before today.
    DaysAgo(u32),
}

/// The most days back a `since` may name (a hundred years).
const MAX_DAYS_AGO: u32 = 36_500;

impl Since {
    /// Reads `2026-11-01` or `30d`; anything else is `INVALID_REQUEST` saying what to write.
    pub fn parse(text: &str) -> Result<Since, crate::DroverError> {
        let text = text.trim();
        if let Some(days) = text.strip_suffix('d')
            && let Ok(days) = days.parse::<u32>()
            && days <= MAX_DAYS_AGO
        {
            return Ok(Since::DaysAgo(days));
        }
        chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map(Since::Date)
            .map_err(|_| {
                crate::DroverError::new(
                    crate::ErrorCode::InvalidRequest,
                    format!(
                        "cannot read {:?} as a date; write a day as YYYY-MM-DD (2026-11-01) or days back as Nd (30d, at most {MAX_DAYS_AGO}d)",
                        crate::text::clip(text, 40)
                    ),
                )
            })
    }

    /// SQLite's `date()` arguments naming that local day.
    fn sql_args(self) -> [String; 3] {
        match self {
            Since::Date(day) => [
                day.format("%Y-%m-%d").to_string(),
                "+0 days".into(),
                "+0 days".into(),
            ],
            Since::DaysAgo(days) => ["now".into(), "localtime".into(), format!("-{days} days")],
        }
    }
}

/// What a grouping reads beside the usage rows.
enum Joins {
    None,
    Run,
    Tags,
}

/// One group's money, each basis apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendRow {
    /// The group: a day or week (`YYYY-MM-DD`), a model, provider, repository, workflow
    /// or tag.
    pub key: String,
    /// Dollars the providers reported.
    pub reported_usd: f64,
    /// Dollars drover estimated from the catalog's list prices.
    pub estimated_usd: f64,
    /// Usage rows that could not be priced: their tokens are counted, their cost unknown.
    pub unpriced_rows: u64,
    /// Runs with usage in the group.
    pub runs: u64,
    /// Tokens of every class (input, output, reasoning, cache read and write).
    pub tokens: u64,
}

impl SpendRow {
    /// The dollars known: reported and estimated.
    pub fn usd(&self) -> f64 {
        self.reported_usd + self.estimated_usd
    }
}

/// The answer to `spend`: the groups and their total.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendView {
    /// What the rows are grouped by.
    pub by: SpendBy,
    /// Only usage at or after this time (ms since the Unix epoch: the start of the local
    /// day `since` named); `None`: all of it.
    #[serde(default)]
    pub since: Option<UnixMillis>,
    /// The groups: periods oldest first, names by spend (largest first).
    pub rows: Vec<SpendRow>,
    /// Every usage row read, once (a run with two tags counts once here).
    pub total: SpendRow,
}

/// Where a call's answer is summed from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The running totals the ledger keeps (migration 13): a few rows a day.
    Totals,
    /// The usage rows themselves: one aggregate over every row.
    Rows,
}

/// Where spend starts, as the reader's calendar has it: the start of the local day in ms,
/// that day and today (`YYYY-MM-DD`).
type Bounds = (UnixMillis, String, String);

impl LedgerReader {
    /// Spend by `by`, of the usage since the start of the local day `since` names: from
    /// the running totals when they can answer ([`LedgerReader::spend_from_totals`]),
    /// else summed from the rows ([`LedgerReader::spend_from_rows`]).
    pub fn spend(&self, by: SpendBy, since: Option<Since>) -> Result<SpendView, LedgerError> {
        match self.spend_from_totals(by, since)? {
            Some(view) => Ok(view),
            None => self.spend_from_rows(by, since),
        }
    }

    /// Spend read from the running totals the ledger keeps in the transaction that writes
    /// each usage row (docs/ARCHITECTURE.md §"Spend over time"), a few rows a day whatever
    /// the history's size. `None` when they cannot answer: a file no owner has brought to
    /// them yet, or — when days matter (by day or week, or a `since`) — one whose days
    /// were written in another calendar than this process's (`TZ`).
    pub fn spend_from_totals(
        &self,
        by: SpendBy,
        since: Option<Since>,
    ) -> Result<Option<SpendView>, LedgerError> {
        if !self.spend_totals {
            return Ok(None);
        }
        let bounds = self.spend_bounds(since)?;
        if (by.is_time() || bounds.is_some()) && !self.same_calendar()? {
            return Ok(None);
        }
        self.spend_answer(by, bounds, Source::Totals).map(Some)
    }

    /// The same answer as [`LedgerReader::spend`], summed from the usage rows themselves:
    /// one aggregate over every row (the total in the same statement). Runs deleted whole
    /// (retention's cap on runs) are not in it, while the totals keep their money.
    pub fn spend_from_rows(
        &self,
        by: SpendBy,
        since: Option<Since>,
    ) -> Result<SpendView, LedgerError> {
        let bounds = self.spend_bounds(since)?;
        self.spend_answer(by, bounds, Source::Rows)
    }

    /// The local day's start in UTC (SQLite's `localtime` and `utc` follow `TZ`), that
    /// day and today.
    fn spend_bounds(&self, since: Option<Since>) -> Result<Option<Bounds>, LedgerError> {
        let Some(since) = since else {
            return Ok(None);
        };
        let [day, a, b] = since.sql_args();
        Ok(Some(self.conn.query_row(
            "SELECT CAST(strftime('%s', date(?1, ?2, ?3), 'utc') AS INTEGER),
                date(?1, ?2, ?3), date('now', 'localtime')",
            params![day, a, b],
            |r| {
                Ok((
                    r.get::<_, i64>(0)? * 1000,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )?))
    }

    /// Whether every day the totals hold was written in this process's calendar: each
    /// has the bounds here that it had where it was written, and none was written in two.
    /// Then each usage row's day there is its day here.
    fn same_calendar(&self) -> Result<bool, LedgerError> {
        let differs: bool = self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM spend_days WHERE mixed != 0
                OR start_ms IS NOT CAST(strftime('%s', day, 'utc') AS INTEGER) * 1000
                OR end_ms IS NOT CAST(strftime('%s', day, '+1 day', 'utc') AS INTEGER) * 1000)",
            [],
            |r| r.get(0),
        )?;
        Ok(!differs)
    }

    fn spend_answer(
        &self,
        by: SpendBy,
        bounds: Option<Bounds>,
        source: Source,
    ) -> Result<SpendView, LedgerError> {
        let since = bounds.as_ref().map(|(at, _, _)| *at);
        let (sql, from) = match source {
            Source::Totals => (
                // A run is counted on its last day in each group: the runs with usage
                // since a day are those counted on or after it.
                "SELECT 0 AS total, key,
                     SUM(reported_usd), SUM(estimated_usd), SUM(unpriced_rows), SUM(runs),
                     SUM(tokens)
                 FROM spend_totals WHERE grp = ?1 AND day >= ?2
                 GROUP BY key HAVING SUM(usage_rows) > 0
                 UNION ALL
                 SELECT 1, 'total',
                     COALESCE(SUM(reported_usd), 0.0), COALESCE(SUM(estimated_usd), 0.0),
                     COALESCE(SUM(unpriced_rows), 0), COALESCE(SUM(runs), 0),
                     COALESCE(SUM(tokens), 0)
                 FROM spend_totals WHERE grp = 'total' AND day >= ?2"
                    .to_string(),
                bounds
                    .as_ref()
                    .map(|(_, day, _)| day.clone())
                    .unwrap_or_default(),
            ),
            Source::Rows => (rows_sql(by), String::new()),
        };
        let mut st = self.conn.prepare_cached(&sql)?;
        let mut rows = Vec::new();
        let mut total = SpendRow {
            key: "total".into(),
            ..SpendRow::default()
        };
        let read = |r: &rusqlite::Row<'_>| {
            Ok((
                r.get::<_, i64>(0)? == 1,
                SpendRow {
                    key: r.get(1)?,
                    reported_usd: r.get(2)?,
                    estimated_usd: r.get(3)?,
                    unpriced_rows: r.get::<_, i64>(4)?.max(0) as u64,
                    runs: r.get::<_, i64>(5)?.max(0) as u64,
                    tokens: r.get::<_, i64>(6)?.max(0) as u64,
                },
            ))
        };
        let read: Vec<_> = match source {
            Source::Totals => st
                .query_map(params![by.as_str(), from], read)?
                .collect::<Result<_, _>>()?,
            Source::Rows => st
                .query_map(params![since.unwrap_or(i64::MIN)], read)?
                .collect::<Result<_, _>>()?,
        };
        for row in read {
            match row {
                (true, row) => total = row,
                (false, row) => rows.push(row),
            }
        }
        if let (SpendBy::Day, Some((_, first, today))) = (by, &bounds) {
            every_day(&mut rows, first, today);
        }
        if by.is_time() {
            rows.sort_by(|a, b| a.key.cmp(&b.key));
        } else {
            rows.sort_by(|a, b| {
                b.usd()
                    .total_cmp(&a.usd())
                    .then(b.unpriced_rows.cmp(&a.unpriced_rows))
                    .then(a.key.cmp(&b.key))
            });
        }
        Ok(SpendView {
            by,
            since,
            rows,
            total,
        })
    }
}

/// The aggregate over the usage rows since `?1` (ms) for `by`; the total, over each
/// usage row once (with tags a row may be in several groups), as its last row.
fn rows_sql(by: SpendBy) -> String {
    let (key, joins) = by.key_sql();
    let from = match joins {
        Joins::None => "usage u",
        Joins::Run => "usage u JOIN runs r ON r.run_id = u.run_id",
        Joins::Tags => {
            "usage u JOIN runs r ON r.run_id = u.run_id \
             LEFT JOIN json_each(r.spec_json, '$.tags') t"
        }
    };
    format!(
        "WITH rows AS (
            SELECT {key} AS k, u.id AS id, u.run_id AS run_id, u.basis AS basis,
                u.cost_usd AS cost,
                u.input + u.output + u.reasoning + u.cache_read + u.cache_write AS tokens
            FROM {from}
            WHERE u.at >= ?1
         )
         SELECT 0 AS total, k,
             COALESCE(SUM(CASE WHEN basis = 'reported' THEN cost END), 0.0),
             COALESCE(SUM(CASE WHEN basis = 'estimated' THEN cost END), 0.0),
             SUM(basis = 'unpriced'), COUNT(DISTINCT run_id), COALESCE(SUM(tokens), 0)
         FROM rows GROUP BY k
         UNION ALL
         SELECT 1, 'total',
             COALESCE(SUM(CASE WHEN basis = 'reported' THEN cost END), 0.0),
             COALESCE(SUM(CASE WHEN basis = 'estimated' THEN cost END), 0.0),
             COALESCE(SUM(basis = 'unpriced'), 0), COUNT(DISTINCT run_id),
             COALESCE(SUM(tokens), 0)
         FROM (SELECT DISTINCT id, run_id, basis, cost, tokens FROM rows)"
    )
}

/// Days of spend from `first` to `today` (local, `YYYY-MM-DD`) with no usage get a row of
/// their own, at zero: a chart of the last days has every day (at most [`MAX_DAYS_AGO`]).
fn every_day(rows: &mut Vec<SpendRow>, first: &str, today: &str) {
    let parse = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
    let (Some(mut day), Some(today)) = (parse(first), parse(today)) else {
        return;
    };
    let have: std::collections::HashSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let mut added = 0;
    while day <= today && added <= MAX_DAYS_AGO {
        let key = day.format("%Y-%m-%d").to_string();
        if !have.contains(&key) {
            rows.push(SpendRow {
                key,
                ..SpendRow::default()
            });
        }
        added += 1;
        match day.succ_opt() {
            Some(next) => day = next,
            None => break,
        }
    }
}
