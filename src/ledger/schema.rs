//! The ledger's schema and its forward-only migrations.
//!
//! `PRAGMA user_version` holds the number of migrations applied. A migration is never
//! edited once shipped; a change is a new entry at the end of [`MIGRATIONS`]. A file with a
//! newer version than this build knows is refused, not guessed at.

use rusqlite::Connection;

use super::LedgerError;

/// Each entry moves the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: runs, their ordered events, turns, usage rows, decisions, budget sessions.
    r#"
    CREATE TABLE runs (
        run_id              TEXT PRIMARY KEY,
        created_at          INTEGER NOT NULL,
        updated_at          INTEGER NOT NULL,
        finished_at         INTEGER,
        state               TEXT NOT NULL,
        completion_reason   TEXT,
        provider            TEXT NOT NULL,
        model               TEXT,
        title               TEXT NOT NULL,
        budget_session      TEXT NOT NULL,
        workflow_id         TEXT,
        parent_run          TEXT,
        idempotency_key     TEXT,
        provider_session_id TEXT,
        removed             INTEGER NOT NULL DEFAULT 0,
        spec_json           TEXT NOT NULL,
        live_state_json     TEXT,
        result_json         TEXT
    );
    CREATE INDEX runs_by_state ON runs(state);
    CREATE INDEX runs_by_finished ON runs(finished_at) WHERE finished_at IS NOT NULL;
    CREATE INDEX runs_by_idempotency ON runs(idempotency_key) WHERE idempotency_key IS NOT NULL;

    CREATE TABLE events (
        run_id    TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        seq       INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        at        INTEGER NOT NULL,
        body_json TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;

    -- Contiguous seq per run: 1, 2, 3, … with no gap and no repeat.
    CREATE TRIGGER events_seq_contiguous BEFORE INSERT ON events
    BEGIN
        SELECT RAISE(ABORT, 'event seq is not contiguous')
        WHERE NEW.seq != COALESCE((SELECT MAX(seq) FROM events WHERE run_id = NEW.run_id), 0) + 1;
    END;
    CREATE TRIGGER events_immutable BEFORE UPDATE ON events
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only');
    END;

    CREATE TABLE turns (
        run_id         TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        number         INTEGER NOT NULL,
        origin         TEXT NOT NULL,
        started_at     INTEGER NOT NULL,
        ended_at       INTEGER,
        prompt_preview TEXT NOT NULL,
        text           TEXT,
        usage_json     TEXT,
        cost_usd       REAL,
        result_json    TEXT,
        PRIMARY KEY (run_id, number)
    ) WITHOUT ROWID;

    CREATE TABLE usage (
        id             INTEGER PRIMARY KEY,
        run_id         TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        turn           INTEGER,
        at             INTEGER NOT NULL,
        provider       TEXT NOT NULL,
        model          TEXT,
        part           TEXT NOT NULL,
        input          INTEGER NOT NULL DEFAULT 0,
        output         INTEGER NOT NULL DEFAULT 0,
        reasoning      INTEGER NOT NULL DEFAULT 0,
        cache_read     INTEGER NOT NULL DEFAULT 0,
        cache_write    INTEGER NOT NULL DEFAULT 0,
        cost_usd       REAL,
        basis          TEXT NOT NULL,
        fidelity       TEXT NOT NULL,
        source         TEXT NOT NULL,
        budget_session TEXT NOT NULL
    );
    CREATE INDEX usage_by_run ON usage(run_id);
    CREATE INDEX usage_by_session ON usage(budget_session);

    CREATE TABLE decisions (
        id         INTEGER PRIMARY KEY,
        run_id     TEXT REFERENCES runs(run_id) ON DELETE CASCADE,
        at         INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        request_id TEXT,
        who        TEXT NOT NULL,
        decision   TEXT NOT NULL,
        body_json  TEXT NOT NULL
    );
    CREATE INDEX decisions_by_run ON decisions(run_id);

    CREATE TABLE budget_sessions (
        name         TEXT PRIMARY KEY,
        created_at   INTEGER NOT NULL,
        warning_usd  REAL,
        hard_cap_usd REAL
    );

    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    "#,
    // 2: each run's workspace (its worktree, branch and base, what it changed), as JSON.
    r#"
    ALTER TABLE runs ADD COLUMN workspace_json TEXT;
    "#,
    // 3: the processes each run's child started (pid and start time on a boot), so the
    // next owner can end what a crashed one left.
    r#"
    CREATE TABLE processes (
        run_id      TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        start_ticks INTEGER NOT NULL,
        pgid        INTEGER NOT NULL,
        boot_id     TEXT NOT NULL,
        noted_at    INTEGER NOT NULL,
        PRIMARY KEY (run_id, pid, start_ticks)
    ) WITHOUT ROWID;
    "#,
    // 4: history at any size. When retention last pruned a run's events (its row, turns,
    // usage and decisions stay); finished runs in the order they are paged (newest
    // finished first); active runs on their own; each session's spend read from the index.
    r#"
    ALTER TABLE runs ADD COLUMN events_pruned_at INTEGER;
    CREATE INDEX runs_by_finished_page ON runs(finished_at, run_id) WHERE finished_at IS NOT NULL;
    CREATE INDEX runs_active ON runs(created_at, run_id) WHERE finished_at IS NULL;
    CREATE INDEX usage_by_session_spend ON usage(budget_session, cost_usd);
    CREATE INDEX usage_by_session_basis ON usage(budget_session, basis, run_id);
    CREATE INDEX runs_by_created ON runs(created_at);
    CREATE INDEX runs_by_checkout ON runs(json_extract(workspace_json, '$.checkout'))
        WHERE workspace_json IS NOT NULL;
    "#,
    // 5: approval rules (DESIGN.md §14): scope, kind, pattern, decision; the whole rule
    // as JSON beside the columns a person looks at.
    r#"
    CREATE TABLE rules (
        id          INTEGER PRIMARY KEY,
        scope       TEXT NOT NULL,
        kind        TEXT NOT NULL,
        pattern     TEXT NOT NULL,
        decision    TEXT NOT NULL,
        run_id      TEXT,
        repository  TEXT,
        created_at  INTEGER NOT NULL,
        rule_json   TEXT NOT NULL
    );
    "#,
];

/// The schema version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the file up to [`current_version`]; each migration in its own transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > current_version() {
        return Err(LedgerError::TooNew {
            found,
            known: current_version(),
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// Connection settings every ledger connection uses.
pub fn configure(conn: &Connection) -> Result<(), LedgerError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}
