//! The ledger's schema and its forward-only migrations.
//!
//! `PRAGMA user_version` holds the number of migrations applied. A migration is never
//! edited once shipped; a change is a new entry at the end of [`MIGRATIONS`]. A file with a
//! newer version than this build knows is refused, not guessed at.

use rusqlite::Connection;

use super::LedgerError;

// What the search index holds of each row, written once for the migrations' triggers and
// backfill and for the reader, which reads a hit's text back the same way
// (docs/ARCHITECTURE.md §"Ledger"). Each takes the SQL names of the columns it reads.

/// Whether an event was indexed by migration 7's index (replaced by migration 8's): a
/// transcript event of the agent's text or a tool call.
macro_rules! search_event_indexed {
    ($kind:literal, $body:literal) => {
        concat!(
            $kind,
            " = 'transcript' AND ",
            $body,
            " ->> '$.event.type' IN ('assistant_text', 'tool_started')"
        )
    };
}
/// An event's text in migration 7's index: the agent's whole text, or the tool call's
/// line (its name and command, file, address or subject).
macro_rules! search_event_text {
    ($body:literal) => {
        concat!(
            "CASE ",
            $body,
            " ->> '$.event.type' WHEN 'assistant_text' THEN ",
            $body,
            " ->> '$.event.text' ELSE ",
            $body,
            " ->> '$.line' END"
        )
    };
}
/// A turn's result: a `## Result` block's summary, question and changes, or the JSON
/// answer of a run with an output schema as it is.
macro_rules! search_result_text {
    ($result:literal) => {
        concat!(
            "CASE WHEN json_valid(",
            $result,
            ") AND ",
            $result,
            " ->> '$.found' = 1 THEN ",
            "concat_ws(' · ', ",
            $result,
            " ->> '$.summary', ",
            $result,
            " ->> '$.question', ",
            "(SELECT group_concat(value, ' · ') FROM json_each(",
            $result,
            ", '$.changes'))) ",
            "ELSE ",
            $result,
            " END"
        )
    };
}
/// Whether an event is a tool call the index holds (migration 8): a transcript event of
/// type `tool_started`. Since migration 12 the writer indexes a new call as it appends it
/// (the dispatcher says which events are calls); this condition still finds a call's
/// document to take out with its event, and built the index from the rows. The body is compact JSON (serde's, as the writer stores it), so
/// a plain search for the key and its value rules out nearly every other event before
/// its JSON is read (inside a JSON string a `"` is always escaped: the text of an agent
/// cannot fake it).
macro_rules! search_tool_indexed {
    ($kind:literal, $body:literal) => {
        concat!(
            $kind,
            " = 'transcript' AND instr(",
            $body,
            ", '\"type\":\"tool_started\"') > 0 AND ",
            $body,
            " ->> '$.event.type' = 'tool_started'"
        )
    };
}
/// The seqs bounding turn `$number` of run `$run`: `lo`, its `turn_started` event's, and
/// `hi`, the next turn's (or past the run's last event); no row when it has none. Read
/// from the `events_turn_started` index (one row a turn), named: without it the planner
/// may walk the run's events by their key instead (every event of a long turn).
macro_rules! search_turn_bounds {
    ($run:literal, $number:literal) => {
        concat!(
            "(SELECT s.seq AS lo, COALESCE((SELECT MIN(n.seq) FROM events n \
             INDEXED BY events_turn_started WHERE n.run_id = ",
            $run,
            " AND n.kind = 'turn_started' AND n.seq > s.seq), 9223372036854775807) AS hi \
             FROM events s INDEXED BY events_turn_started WHERE s.run_id = ",
            $run,
            " AND s.kind = 'turn_started' AND s.body_json ->> '$.number' = ",
            $number,
            " ORDER BY s.seq DESC LIMIT 1)"
        )
    };
}
/// The agent's text in turn `$number` of run `$run` (migration 8): the text of each
/// `assistant_text` transcript event from the turn's `turn_started` event to the next
/// one (or the run's last event), one per line; NULL when there is none. The bounds are
/// read once, then the events between them by their key (run, seq): in their order,
/// which no sort has to restore (the only index of `events` that a transcript event is
/// in is its key).
macro_rules! search_turn_text {
    ($run:literal, $number:literal) => {
        concat!(
            "(SELECT group_concat(e.body_json ->> '$.event.text', char(10)) \
             FROM ",
            search_turn_bounds!($run, $number),
            " AS b JOIN events e ON e.run_id = ",
            $run,
            " AND e.seq > b.lo AND e.seq < b.hi \
             WHERE e.kind = 'transcript' \
             AND instr(e.body_json, '\"type\":\"assistant_text\"') > 0 \
             AND e.body_json ->> '$.event.type' = 'assistant_text')"
        )
    };
}
pub(super) use {search_result_text, search_turn_bounds, search_turn_text};

// What the spend totals keep of each usage row (migration 13, docs/ARCHITECTURE.md
// §"Spend over time"), written once for the triggers and the backfill, as
// `ledger::spend` sums the rows themselves. Each takes the SQL names it reads.

/// A usage row's local calendar day (`YYYY-MM-DD`, SQLite's `localtime`).
macro_rules! spend_day {
    ($at:literal) => {
        concat!("date(", $at, " / 1000, 'unixepoch', 'localtime')")
    };
}
/// The week of a local day: its Monday (`weekday 0` moves on to the Sunday, six days
/// back is its Monday).
macro_rules! spend_week {
    ($day:expr) => {
        concat!("date(", $day, ", 'weekday 0', '-6 days')")
    };
}
/// A JSON column as it is when it reads as JSON, else NULL: a damaged row never makes
/// a write fail (its spend counts as `unknown` or `none`).
macro_rules! spend_json {
    ($column:literal) => {
        concat!(
            "(CASE WHEN json_valid(",
            $column,
            ") THEN ",
            $column,
            " END)"
        )
    };
}
/// A run's repository: the checkout its worktree came from, else its cwd.
macro_rules! spend_repository {
    ($workspace:literal, $spec:literal) => {
        concat!(
            "COALESCE(",
            spend_json!($workspace),
            " ->> '$.checkout', ",
            spend_json!($spec),
            " ->> '$.cwd', 'unknown')"
        )
    };
}
/// A run's tags, each once, `none` for a run with none: a subquery of one column `k`.
macro_rules! spend_tags {
    ($spec:literal) => {
        concat!(
            "(SELECT DISTINCT COALESCE(t.value, 'none') AS k FROM (SELECT 1) \
             LEFT JOIN json_each(",
            spend_json!($spec),
            ", '$.tags') t)"
        )
    };
}
/// A usage row's money and tokens as the columns of `spend_totals`: reported dollars
/// (`rep`), estimated dollars (`est`), unpriced rows (`unp`), tokens (`tok`).
macro_rules! spend_amounts {
    ($u:literal) => {
        concat!(
            "COALESCE(CASE WHEN ",
            $u,
            ".basis = 'reported' THEN ",
            $u,
            ".cost_usd END, 0.0) AS rep, ",
            "COALESCE(CASE WHEN ",
            $u,
            ".basis = 'estimated' THEN ",
            $u,
            ".cost_usd END, 0.0) AS est, ",
            "(",
            $u,
            ".basis = 'unpriced') AS unp, ",
            $u,
            ".input + ",
            $u,
            ".output + ",
            $u,
            ".reasoning + ",
            $u,
            ".cache_read + ",
            $u,
            ".cache_write AS tok"
        )
    };
}
/// A local day's start and end in ms since the Unix epoch, as this process's calendar
/// has them (SQLite's `utc` reads the day as local time).
macro_rules! spend_day_bounds {
    ($day:literal) => {
        concat!(
            "CAST(strftime('%s', ",
            $day,
            ", 'utc') AS INTEGER) * 1000, ",
            "CAST(strftime('%s', ",
            $day,
            ", '+1 day', 'utc') AS INTEGER) * 1000"
        )
    };
}
/// Notes a local day in `spend_days` with its bounds; a day already there with other
/// bounds (written in another calendar) is marked `mixed`. `$days` is a SELECT of one
/// column `d`.
macro_rules! spend_note_days {
    ($days:expr) => {
        concat!(
            "INSERT INTO spend_days (day, start_ms, end_ms, mixed) SELECT d, ",
            spend_day_bounds!("d"),
            ", 0 FROM (",
            $days,
            ") WHERE true ON CONFLICT (day) DO UPDATE SET mixed = 1 \
             WHERE start_ms IS NOT excluded.start_ms OR end_ms IS NOT excluded.end_ms;"
        )
    };
}
/// Every group the new usage row `NEW` counts in, with the day the run's last usage in
/// that group was on before it (`prev`; NULL for the run's first row there): its day,
/// its week, its model and provider, and — from its run — the total, its repository,
/// its workflow and each of its tags. Read from `spend_run_days` before the row's own
/// day is noted there.
macro_rules! spend_groups_of_new {
    () => {
        concat!(
            "(SELECT 'day' AS g, d AS k, (SELECT key FROM spend_run_days \
                 WHERE run_id = NEW.run_id AND kind = 'day' AND key = d) AS prev \
             FROM (SELECT ", spend_day!("NEW.at"), " AS d)
             UNION ALL
             SELECT 'week', w, (SELECT MAX(key) FROM spend_run_days
                 WHERE run_id = NEW.run_id AND kind = 'day' AND key BETWEEN w AND date(w, '+6 days'))
             FROM (SELECT ", spend_week!(spend_day!("NEW.at")), " AS w)
             UNION ALL
             SELECT 'model', m, (SELECT last_day FROM spend_run_days
                 WHERE run_id = NEW.run_id AND kind = 'model' AND key = m)
             FROM (SELECT COALESCE(NEW.model, 'unknown') AS m)
             UNION ALL
             SELECT 'provider', NEW.provider, (SELECT last_day FROM spend_run_days
                 WHERE run_id = NEW.run_id AND kind = 'provider' AND key = NEW.provider)
             UNION ALL
             SELECT g, k, (SELECT MAX(key) FROM spend_run_days
                 WHERE run_id = NEW.run_id AND kind = 'day')
             FROM (SELECT 'total' AS g, 'total' AS k
                 UNION ALL
                 SELECT 'repository', ", spend_repository!("r.workspace_json", "r.spec_json"), "
                     FROM runs r WHERE r.run_id = NEW.run_id
                 UNION ALL
                 SELECT 'workflow', COALESCE(r.workflow_id, 'none')
                     FROM runs r WHERE r.run_id = NEW.run_id
                 UNION ALL
                 SELECT DISTINCT 'tag', COALESCE(t.value, 'none')
                     FROM runs r LEFT JOIN json_each(", spend_json!("r.spec_json"), ", '$.tags') t
                     WHERE r.run_id = NEW.run_id))"
        )
    };
}
/// Moves a run's money in the run-level grouping `$g` from the groups `$old` to the
/// groups `$new` (subqueries of one column `k`; a group in both stays): its usage rows'
/// sums day by day, and the run itself, counted on its last day. The days are noted
/// again: read in another calendar than they were written in, they mark it `mixed`.
macro_rules! spend_move_run {
    ($g:literal, $old:expr, $new:expr) => {
        concat!(
            spend_note_days!(concat!(
                "SELECT DISTINCT ",
                spend_day!("at"),
                " AS d FROM usage WHERE run_id = NEW.run_id"
            )),
            "
        INSERT INTO spend_totals (grp, key, day, reported_usd, estimated_usd,
                unpriced_rows, tokens, usage_rows, runs)
            SELECT '",
            $g,
            "', m.k, s.d, m.sign * s.rep, m.sign * s.est, m.sign * s.unp,
                m.sign * s.tok, m.sign * s.n,
                m.sign * (s.d = (SELECT MAX(key) FROM spend_run_days
                                 WHERE run_id = NEW.run_id AND kind = 'day'))
            FROM (SELECT k, -1 AS sign FROM ",
            $old,
            " WHERE k NOT IN ",
            $new,
            "
                  UNION ALL
                  SELECT k, 1 FROM ",
            $new,
            " WHERE k NOT IN ",
            $old,
            ") m,
                 (SELECT d, SUM(rep) AS rep, SUM(est) AS est, SUM(unp) AS unp,
                      SUM(tok) AS tok, COUNT(*) AS n
                  FROM (SELECT ",
            spend_day!("u.at"),
            " AS d, ",
            spend_amounts!("u"),
            "
                        FROM usage u WHERE u.run_id = NEW.run_id)
                  GROUP BY d) s
            WHERE true
            ON CONFLICT (grp, key, day) DO UPDATE SET
                reported_usd = reported_usd + excluded.reported_usd,
                estimated_usd = estimated_usd + excluded.estimated_usd,
                unpriced_rows = unpriced_rows + excluded.unpriced_rows,
                tokens = tokens + excluded.tokens,
                usage_rows = usage_rows + excluded.usage_rows,
                runs = runs + excluded.runs;"
        )
    };
}

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
    // 5: approval rules (docs/ARCHITECTURE.md §"Approval rules and the guard"): scope,
    // kind, pattern, decision; the whole rule as JSON beside the columns a person looks at.
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
    // 6: running totals, kept by triggers in the transaction that writes (or deletes) each
    // usage row and run, so a session's money and the runs by state are read at the same
    // cost at any history size; backfilled from the rows already there. A basis word's
    // rank orders bases as `ledger::Basis` does, an unknown word being the
    // weakest: unpriced 0, estimated 1, reported 2, free 3. Usage rows are append-only
    // (their totals count them as written); deleting one (a run deleted whole) takes it
    // out of the totals again.
    r#"
    -- Each session's spend (the sum of its usage rows' cost) and how many rows it has.
    CREATE TABLE session_money (
        budget_session TEXT PRIMARY KEY,
        spent_usd      REAL NOT NULL,
        usage_rows     INTEGER NOT NULL
    ) WITHOUT ROWID;
    -- Each run's weakest basis among its usage rows of a session.
    CREATE TABLE session_run_basis (
        budget_session TEXT NOT NULL,
        run_id         TEXT NOT NULL,
        weakest        INTEGER NOT NULL,
        usage_rows     INTEGER NOT NULL,
        PRIMARY KEY (budget_session, run_id)
    ) WITHOUT ROWID;
    CREATE INDEX session_run_basis_by_weakest ON session_run_basis(budget_session, weakest);
    -- How many of a session's runs have each weakest basis.
    CREATE TABLE session_basis_runs (
        budget_session TEXT NOT NULL,
        weakest        INTEGER NOT NULL,
        runs           INTEGER NOT NULL,
        PRIMARY KEY (budget_session, weakest)
    ) WITHOUT ROWID;
    -- How many runs are in each state, removed from the trays or not, finished or not.
    CREATE TABLE run_counts (
        state    TEXT NOT NULL,
        removed  INTEGER NOT NULL,
        finished INTEGER NOT NULL,
        runs     INTEGER NOT NULL,
        PRIMARY KEY (state, removed, finished)
    ) WITHOUT ROWID;

    INSERT INTO session_money (budget_session, spent_usd, usage_rows)
        SELECT budget_session, COALESCE(SUM(cost_usd), 0.0), COUNT(*) FROM usage
        GROUP BY budget_session;
    INSERT INTO session_run_basis (budget_session, run_id, weakest, usage_rows)
        SELECT budget_session, run_id,
            MIN(CASE basis WHEN 'estimated' THEN 1 WHEN 'reported' THEN 2 WHEN 'free' THEN 3
                ELSE 0 END),
            COUNT(*)
        FROM usage GROUP BY budget_session, run_id;
    INSERT INTO session_basis_runs (budget_session, weakest, runs)
        SELECT budget_session, weakest, COUNT(*) FROM session_run_basis
        GROUP BY budget_session, weakest;
    INSERT INTO run_counts (state, removed, finished, runs)
        SELECT state, removed, finished_at IS NOT NULL, COUNT(*) FROM runs
        GROUP BY state, removed, finished_at IS NOT NULL;

    CREATE TRIGGER usage_counted AFTER INSERT ON usage
    BEGIN
        INSERT INTO session_money (budget_session, spent_usd, usage_rows)
            VALUES (NEW.budget_session, COALESCE(NEW.cost_usd, 0.0), 1)
            ON CONFLICT (budget_session) DO UPDATE SET
                spent_usd = spent_usd + excluded.spent_usd, usage_rows = usage_rows + 1;
        -- A row weaker than its run's weakest moves the run out of that basis's count…
        UPDATE session_basis_runs SET runs = runs - 1
            WHERE budget_session = NEW.budget_session
              AND weakest = (SELECT weakest FROM session_run_basis
                             WHERE budget_session = NEW.budget_session AND run_id = NEW.run_id)
              AND weakest > (CASE NEW.basis WHEN 'estimated' THEN 1 WHEN 'reported' THEN 2
                             WHEN 'free' THEN 3 ELSE 0 END);
        -- …and into its own (a run's first row puts the run there).
        INSERT INTO session_basis_runs (budget_session, weakest, runs)
            SELECT NEW.budget_session, (CASE NEW.basis WHEN 'estimated' THEN 1
                WHEN 'reported' THEN 2 WHEN 'free' THEN 3 ELSE 0 END), 1
            WHERE COALESCE((SELECT weakest FROM session_run_basis
                            WHERE budget_session = NEW.budget_session AND run_id = NEW.run_id),
                           4)
                  > (CASE NEW.basis WHEN 'estimated' THEN 1 WHEN 'reported' THEN 2
                     WHEN 'free' THEN 3 ELSE 0 END)
            ON CONFLICT (budget_session, weakest) DO UPDATE SET runs = runs + 1;
        INSERT INTO session_run_basis (budget_session, run_id, weakest, usage_rows)
            VALUES (NEW.budget_session, NEW.run_id, (CASE NEW.basis WHEN 'estimated' THEN 1
                WHEN 'reported' THEN 2 WHEN 'free' THEN 3 ELSE 0 END), 1)
            ON CONFLICT (budget_session, run_id) DO UPDATE SET
                weakest = MIN(weakest, excluded.weakest), usage_rows = usage_rows + 1;
    END;

    CREATE TRIGGER usage_uncounted AFTER DELETE ON usage
    BEGIN
        UPDATE session_money SET
                usage_rows = usage_rows - 1,
                spent_usd = CASE WHEN usage_rows = 1 THEN 0.0
                    ELSE spent_usd - COALESCE(OLD.cost_usd, 0.0) END
            WHERE budget_session = OLD.budget_session;
        -- The run leaves its basis's count, and comes back under the weakest basis of the
        -- rows it has left (if any).
        UPDATE session_basis_runs SET runs = runs - 1
            WHERE budget_session = OLD.budget_session
              AND weakest = (SELECT weakest FROM session_run_basis
                             WHERE budget_session = OLD.budget_session AND run_id = OLD.run_id);
        DELETE FROM session_run_basis
            WHERE budget_session = OLD.budget_session AND run_id = OLD.run_id;
        INSERT INTO session_run_basis (budget_session, run_id, weakest, usage_rows)
            SELECT OLD.budget_session, OLD.run_id, weakest, n FROM (
                SELECT MIN(CASE basis WHEN 'estimated' THEN 1 WHEN 'reported' THEN 2
                           WHEN 'free' THEN 3 ELSE 0 END) AS weakest, COUNT(*) AS n
                FROM usage WHERE run_id = OLD.run_id AND budget_session = OLD.budget_session)
            WHERE n > 0;
        INSERT INTO session_basis_runs (budget_session, weakest, runs)
            SELECT budget_session, weakest, 1 FROM session_run_basis
            WHERE budget_session = OLD.budget_session AND run_id = OLD.run_id
            ON CONFLICT (budget_session, weakest) DO UPDATE SET runs = runs + 1;
    END;

    CREATE TRIGGER usage_immutable BEFORE UPDATE ON usage
    BEGIN
        SELECT RAISE(ABORT, 'usage rows are append-only');
    END;

    CREATE TRIGGER runs_counted AFTER INSERT ON runs
    BEGIN
        INSERT INTO run_counts (state, removed, finished, runs)
            VALUES (NEW.state, NEW.removed, NEW.finished_at IS NOT NULL, 1)
            ON CONFLICT (state, removed, finished) DO UPDATE SET runs = runs + 1;
    END;
    CREATE TRIGGER runs_uncounted AFTER DELETE ON runs
    BEGIN
        UPDATE run_counts SET runs = runs - 1
            WHERE state = OLD.state AND removed = OLD.removed
              AND finished = (OLD.finished_at IS NOT NULL);
    END;
    CREATE TRIGGER runs_recounted AFTER UPDATE OF state, removed, finished_at ON runs
        WHEN OLD.state IS NOT NEW.state OR OLD.removed IS NOT NEW.removed
          OR (OLD.finished_at IS NULL) IS NOT (NEW.finished_at IS NULL)
    BEGIN
        UPDATE run_counts SET runs = runs - 1
            WHERE state = OLD.state AND removed = OLD.removed
              AND finished = (OLD.finished_at IS NOT NULL);
        INSERT INTO run_counts (state, removed, finished, runs)
            VALUES (NEW.state, NEW.removed, NEW.finished_at IS NOT NULL, 1)
            ON CONFLICT (state, removed, finished) DO UPDATE SET runs = runs + 1;
    END;

    -- The session's money is read from the totals now, not summed from these.
    DROP INDEX usage_by_session_spend;
    DROP INDEX usage_by_session_basis;
    "#,
    // 7: the search index (docs/ARCHITECTURE.md §"Ledger"): FTS5 over what a person
    // searches — each run's task, its follow-ups and its turns' results (kept for every
    // run), and its transcript's agent text and tool calls (pruned with its events). The
    // index keeps no copy of the text (contentless): a hit is read back from its row. A
    // document's rowid says where it comes from: the run's number in `search_runs` in the
    // high 32 bits, and in the low ones 0 for the task, the event's seq, or 2^31 + 2 × the
    // turn's number (+ 1 for its result). Triggers keep it in the transaction that writes
    // or deletes the rows; the runs already there are indexed here, in one pass.
    concat!(
        "
    CREATE TABLE search_runs (
        n      INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE
    );
    CREATE VIRTUAL TABLE search USING fts5(
        text, content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2'
    );

    INSERT INTO search_runs (run_id) SELECT run_id FROM runs ORDER BY created_at, run_id;
    INSERT INTO search (rowid, text)
        SELECT s.n << 32, r.spec_json ->> '$.task' FROM runs r JOIN search_runs s USING (run_id);
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | (2147483648 + 2 * t.number), t.prompt_preview
        FROM turns t JOIN search_runs s USING (run_id) WHERE t.origin = 'follow_up';
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | (2147483649 + 2 * t.number), ",
        search_result_text!("t.result_json"),
        "
        FROM turns t JOIN search_runs s USING (run_id) WHERE t.result_json IS NOT NULL;
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | e.seq, ",
        search_event_text!("e.body_json"),
        "
        FROM events e JOIN search_runs s USING (run_id) WHERE ",
        search_event_indexed!("e.kind", "e.body_json"),
        ";

    CREATE TRIGGER search_run_added AFTER INSERT ON runs
    BEGIN
        INSERT INTO search_runs (run_id) VALUES (NEW.run_id);
        INSERT INTO search (rowid, text)
            SELECT n << 32, NEW.spec_json ->> '$.task' FROM search_runs WHERE run_id = NEW.run_id;
    END;
    -- A run deleted whole takes every document of its own along (its events and turns
    -- are still there before the delete).
    CREATE TRIGGER search_run_deleted BEFORE DELETE ON runs
    BEGIN
        DELETE FROM search WHERE rowid IN (
            SELECT n << 32 FROM search_runs WHERE run_id = OLD.run_id
            UNION ALL
            SELECT (s.n << 32) | e.seq FROM events e JOIN search_runs s USING (run_id)
                WHERE e.run_id = OLD.run_id AND ",
        search_event_indexed!("e.kind", "e.body_json"),
        "
            UNION ALL
            SELECT (s.n << 32) | (2147483648 + 2 * t.number) FROM turns t
                JOIN search_runs s USING (run_id)
                WHERE t.run_id = OLD.run_id AND t.origin = 'follow_up'
            UNION ALL
            SELECT (s.n << 32) | (2147483649 + 2 * t.number) FROM turns t
                JOIN search_runs s USING (run_id)
                WHERE t.run_id = OLD.run_id AND t.result_json IS NOT NULL);
        DELETE FROM search_runs WHERE run_id = OLD.run_id;
    END;

    CREATE TRIGGER search_event_added AFTER INSERT ON events
    WHEN ",
        search_event_indexed!("NEW.kind", "NEW.body_json"),
        "
    BEGIN
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | NEW.seq, ",
        search_event_text!("NEW.body_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id;
    END;
    -- Retention's pruning (and a run deleted whole, whose documents are already gone).
    CREATE TRIGGER search_event_pruned AFTER DELETE ON events
    WHEN ",
        search_event_indexed!("OLD.kind", "OLD.body_json"),
        "
    BEGIN
        DELETE FROM search
            WHERE rowid = (SELECT (n << 32) | OLD.seq FROM search_runs WHERE run_id = OLD.run_id);
    END;

    CREATE TRIGGER search_turn_added AFTER INSERT ON turns
    BEGIN
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483648 + 2 * NEW.number), NEW.prompt_preview
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.origin = 'follow_up';
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483649 + 2 * NEW.number), ",
        search_result_text!("NEW.result_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.result_json IS NOT NULL;
    END;
    CREATE TRIGGER search_turn_changed AFTER UPDATE ON turns
    WHEN OLD.origin IS NOT NEW.origin OR OLD.prompt_preview IS NOT NEW.prompt_preview
      OR OLD.result_json IS NOT NEW.result_json
    BEGIN
        DELETE FROM search WHERE rowid IN (
            SELECT (n << 32) | (2147483648 + 2 * OLD.number) FROM search_runs
                WHERE run_id = OLD.run_id AND OLD.origin = 'follow_up'
            UNION ALL
            SELECT (n << 32) | (2147483649 + 2 * OLD.number) FROM search_runs
                WHERE run_id = OLD.run_id AND OLD.result_json IS NOT NULL);
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483648 + 2 * NEW.number), NEW.prompt_preview
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.origin = 'follow_up';
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483649 + 2 * NEW.number), ",
        search_result_text!("NEW.result_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.result_json IS NOT NULL;
    END;
    "
    ),
    // 8: the search index indexes the agent's text once per turn instead of once per
    // event (docs/ARCHITECTURE.md §"Ledger"): a turn's text is one document, written when
    // the turn's end is recorded (agent text arrives as many small events; a document
    // each cost an FTS5 insert per event). Tool calls stay one document per event. A
    // document's rowid: the run's number in the high 32 bits, and in the low ones 0 for
    // the task, a tool call's event seq, or 2^31 + 4 × the turn's number + 0 for its
    // follow-up, + 1 for its agent text, + 2 for its result. The index is rebuilt from
    // the rows in one pass (`search_runs` stays); its triggers are replaced.
    concat!(
        "
    DROP TRIGGER search_run_added;
    DROP TRIGGER search_run_deleted;
    DROP TRIGGER search_event_added;
    DROP TRIGGER search_event_pruned;
    DROP TRIGGER search_turn_added;
    DROP TRIGGER search_turn_changed;
    DROP TABLE search;
    -- Prefix indexes of 2 and 3 characters: a short prefix query (`lo*`) reads one list
    -- instead of merging every word it starts (benches/search.rs: 126-132 ms → 12-15 ms
    -- at 100,000 runs; the ledger +19.6 % instead of +9.2 %).
    CREATE VIRTUAL TABLE search USING fts5(
        text, content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
    );
    -- Each turn's start, to find its events by (few: one a turn).
    CREATE INDEX events_turn_started ON events(run_id, seq) WHERE kind = 'turn_started';

    INSERT INTO search (rowid, text)
        SELECT s.n << 32, r.spec_json ->> '$.task' FROM runs r JOIN search_runs s USING (run_id);
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | e.seq, e.body_json ->> '$.line'
        FROM events e JOIN search_runs s USING (run_id) WHERE ",
        search_tool_indexed!("e.kind", "e.body_json"),
        ";
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | (2147483648 + 4 * t.number), t.prompt_preview
        FROM turns t JOIN search_runs s USING (run_id) WHERE t.origin = 'follow_up';
    INSERT INTO search (rowid, text)
        SELECT id, text FROM (
            SELECT (s.n << 32) | (2147483649 + 4 * t.number) AS id, ",
        search_turn_text!("t.run_id", "t.number"),
        " AS text
            FROM turns t JOIN search_runs s USING (run_id) WHERE t.ended_at IS NOT NULL)
        WHERE text IS NOT NULL;
    INSERT INTO search (rowid, text)
        SELECT (s.n << 32) | (2147483650 + 4 * t.number), ",
        search_result_text!("t.result_json"),
        "
        FROM turns t JOIN search_runs s USING (run_id) WHERE t.result_json IS NOT NULL;

    CREATE TRIGGER search_run_added AFTER INSERT ON runs
    BEGIN
        INSERT INTO search_runs (run_id) VALUES (NEW.run_id);
        INSERT INTO search (rowid, text)
            SELECT n << 32, NEW.spec_json ->> '$.task' FROM search_runs WHERE run_id = NEW.run_id;
    END;
    -- A run deleted whole takes every document of its own along (its events and turns
    -- are still there before the delete).
    CREATE TRIGGER search_run_deleted BEFORE DELETE ON runs
    BEGIN
        DELETE FROM search WHERE rowid IN (
            SELECT n << 32 FROM search_runs WHERE run_id = OLD.run_id
            UNION ALL
            SELECT (s.n << 32) | e.seq FROM events e JOIN search_runs s USING (run_id)
                WHERE e.run_id = OLD.run_id AND ",
        search_tool_indexed!("e.kind", "e.body_json"),
        "
            UNION ALL
            SELECT (s.n << 32) | (2147483648 + 4 * t.number) FROM turns t
                JOIN search_runs s USING (run_id)
                WHERE t.run_id = OLD.run_id AND t.origin = 'follow_up'
            UNION ALL
            SELECT (s.n << 32) | (2147483649 + 4 * t.number) FROM turns t
                JOIN search_runs s USING (run_id)
                WHERE t.run_id = OLD.run_id AND t.ended_at IS NOT NULL
            UNION ALL
            SELECT (s.n << 32) | (2147483650 + 4 * t.number) FROM turns t
                JOIN search_runs s USING (run_id)
                WHERE t.run_id = OLD.run_id AND t.result_json IS NOT NULL);
        DELETE FROM search_runs WHERE run_id = OLD.run_id;
    END;

    CREATE TRIGGER search_tool_added AFTER INSERT ON events
    WHEN ",
        search_tool_indexed!("NEW.kind", "NEW.body_json"),
        "
    BEGIN
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | NEW.seq, NEW.body_json ->> '$.line'
            FROM search_runs WHERE run_id = NEW.run_id;
    END;
    -- Retention's pruning (and a run deleted whole, whose documents are already gone):
    -- a tool call with its event, a turn's agent text with its `turn_started` event.
    CREATE TRIGGER search_tool_pruned AFTER DELETE ON events
    WHEN ",
        search_tool_indexed!("OLD.kind", "OLD.body_json"),
        "
    BEGIN
        DELETE FROM search
            WHERE rowid = (SELECT (n << 32) | OLD.seq FROM search_runs WHERE run_id = OLD.run_id);
    END;
    CREATE TRIGGER search_turn_text_pruned AFTER DELETE ON events
    WHEN OLD.kind = 'turn_started'
    BEGIN
        DELETE FROM search WHERE rowid = (
            SELECT (n << 32) | (2147483649 + 4 * (OLD.body_json ->> '$.number'))
            FROM search_runs WHERE run_id = OLD.run_id);
    END;

    CREATE TRIGGER search_turn_added AFTER INSERT ON turns
    BEGIN
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483648 + 4 * NEW.number), NEW.prompt_preview
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.origin = 'follow_up';
        INSERT INTO search (rowid, text)
            SELECT id, text FROM (
                SELECT (n << 32) | (2147483649 + 4 * NEW.number) AS id, ",
        search_turn_text!("NEW.run_id", "NEW.number"),
        " AS text
                FROM search_runs WHERE run_id = NEW.run_id AND NEW.ended_at IS NOT NULL)
            WHERE text IS NOT NULL;
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483650 + 4 * NEW.number), ",
        search_result_text!("NEW.result_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.result_json IS NOT NULL;
    END;
    CREATE TRIGGER search_turn_changed AFTER UPDATE ON turns
    WHEN OLD.origin IS NOT NEW.origin OR OLD.prompt_preview IS NOT NEW.prompt_preview
      OR OLD.result_json IS NOT NEW.result_json
    BEGIN
        DELETE FROM search WHERE rowid IN (
            SELECT (n << 32) | (2147483648 + 4 * OLD.number) FROM search_runs
                WHERE run_id = OLD.run_id AND OLD.origin = 'follow_up'
            UNION ALL
            SELECT (n << 32) | (2147483650 + 4 * OLD.number) FROM search_runs
                WHERE run_id = OLD.run_id AND OLD.result_json IS NOT NULL);
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483648 + 4 * NEW.number), NEW.prompt_preview
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.origin = 'follow_up';
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483650 + 4 * NEW.number), ",
        search_result_text!("NEW.result_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.result_json IS NOT NULL;
    END;
    -- A turn's agent text is indexed once, when its end is recorded (a turn in flight
    -- is not searched by its text yet); a turn opened again leaves the index.
    CREATE TRIGGER search_turn_ended AFTER UPDATE OF ended_at ON turns
    WHEN (OLD.ended_at IS NULL) IS NOT (NEW.ended_at IS NULL)
    BEGIN
        DELETE FROM search WHERE rowid = (
            SELECT (n << 32) | (2147483649 + 4 * OLD.number) FROM search_runs
            WHERE run_id = OLD.run_id AND OLD.ended_at IS NOT NULL);
        INSERT INTO search (rowid, text)
            SELECT id, text FROM (
                SELECT (n << 32) | (2147483649 + 4 * NEW.number) AS id, ",
        search_turn_text!("NEW.run_id", "NEW.number"),
        " AS text
                FROM search_runs WHERE run_id = NEW.run_id AND NEW.ended_at IS NOT NULL)
            WHERE text IS NOT NULL;
    END;
    "
    ),
    // 9: a turn's agent text is indexed by the writer, from the text the dispatcher
    // gathered as the turn went and hands it with the turn's end (`WriteOp::EndTurn`), not
    // by a trigger reading the turn's events back at its end (docs/ARCHITECTURE.md
    // §"Ledger"): those are every event of the turn, 10,000 for a long one, read in the
    // transaction every other write waits on. A turn written ended otherwise (a row
    // inserted ended, an `UPDATE`) gets no text document by itself. The documents already
    // there stay; a turn whose end is taken back leaves the index, as before.
    concat!(
        "
    DROP TRIGGER search_turn_ended;
    DROP TRIGGER search_turn_added;
    CREATE TRIGGER search_turn_added AFTER INSERT ON turns
    BEGIN
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483648 + 4 * NEW.number), NEW.prompt_preview
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.origin = 'follow_up';
        INSERT INTO search (rowid, text)
            SELECT (n << 32) | (2147483650 + 4 * NEW.number), ",
        search_result_text!("NEW.result_json"),
        "
            FROM search_runs WHERE run_id = NEW.run_id AND NEW.result_json IS NOT NULL;
    END;
    CREATE TRIGGER search_turn_reopened AFTER UPDATE OF ended_at ON turns
    WHEN OLD.ended_at IS NOT NULL AND NEW.ended_at IS NULL
    BEGIN
        DELETE FROM search WHERE rowid = (
            SELECT (n << 32) | (2147483649 + 4 * OLD.number) FROM search_runs
            WHERE run_id = OLD.run_id);
    END;
    "
    ),
    // 10: the repository scripts the user approved (docs/ARCHITECTURE.md §"Workspaces"):
    // per repository (the top of the user's checkout) and kind (`setup`, `teardown`), the
    // SHA-256 of the script approved and its text (a changed script is shown as a diff
    // against it). Only the latest approval of each is kept.
    r#"
    CREATE TABLE script_approvals (
        repository  TEXT NOT NULL,
        kind        TEXT NOT NULL,
        sha256      TEXT NOT NULL,
        script      TEXT NOT NULL,
        approved_at INTEGER NOT NULL,
        PRIMARY KEY (repository, kind)
    );
    "#,
    // 11: each turn's evidence (docs/ARCHITECTURE.md §"Evidence"): the commands it
    // executed with their exit codes and the tests among them, as JSON.
    r#"
    ALTER TABLE turns ADD COLUMN evidence_json TEXT;
    "#,
    // 12: a tool call is indexed by the writer as it appends the call's event
    // (docs/ARCHITECTURE.md §"Ledger"): the dispatcher knows which events are tool calls
    // and says so (`NewEvent::tool_call`), so no trigger looks into the body of every
    // event appended (a search of it and a JSON read, on the path of every event). The
    // documents already there stay, as do the triggers that take a tool call's document
    // out with its event, whose condition finds the calls of every version.
    r#"
    DROP TRIGGER IF EXISTS search_tool_added;
    "#,
    // 13: spend's running totals (docs/ARCHITECTURE.md §"Spend over time"), kept by
    // triggers in the transaction that writes each usage row, so `drover spend` reads a
    // few rows a day at any history size; backfilled from the rows already there.
    concat!(
        "
    -- Per grouping (`day`, `week`, `model`, `provider`, `repository`, `workflow`, `tag`,
    -- and `total`), group and local day: the money of the usage rows of that day, and
    -- `runs`, how many runs had their last usage row of the group on that day (a run is
    -- counted once per group: the runs with usage since a day are those whose last day
    -- is on or after it). Usage rows deleted with their run stay counted: money spent
    -- stays spent.
    CREATE TABLE spend_totals (
        grp           TEXT NOT NULL,
        key           TEXT NOT NULL,
        day           TEXT NOT NULL,
        reported_usd  REAL NOT NULL,
        estimated_usd REAL NOT NULL,
        unpriced_rows INTEGER NOT NULL,
        tokens        INTEGER NOT NULL,
        usage_rows    INTEGER NOT NULL,
        runs          INTEGER NOT NULL,
        PRIMARY KEY (grp, key, day)
    ) WITHOUT ROWID;
    -- Each run's days with usage (`kind` `day`), and its last day with usage of each
    -- model and provider: what says whether a new row moves the run's last day of a group.
    -- A run deleted whole leaves (its money stays in the totals).
    CREATE TABLE spend_run_days (
        run_id   TEXT NOT NULL,
        kind     TEXT NOT NULL,
        key      TEXT NOT NULL,
        last_day TEXT NOT NULL,
        PRIMARY KEY (run_id, kind, key)
    ) WITHOUT ROWID;
    -- Each local day the totals hold, with its bounds in the calendar it was written in;
    -- `mixed` once it was written in two. A reader whose calendar gives other bounds sums
    -- the rows themselves instead.
    CREATE TABLE spend_days (
        day      TEXT PRIMARY KEY,
        start_ms INTEGER NOT NULL,
        end_ms   INTEGER NOT NULL,
        mixed    INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TEMP TABLE spend_rows AS
        SELECT u.run_id AS run_id, ",
        spend_day!("u.at"),
        " AS day,
            COALESCE(u.model, 'unknown') AS model, u.provider AS provider, ",
        spend_amounts!("u"),
        "
        FROM usage u;
    CREATE TEMP TABLE spend_run_last (run_id TEXT PRIMARY KEY, last TEXT NOT NULL)
        WITHOUT ROWID;
    INSERT INTO spend_run_last SELECT run_id, MAX(day) FROM spend_rows GROUP BY run_id;
    CREATE TEMP TABLE spend_run_groups (
        run_id TEXT NOT NULL, g TEXT NOT NULL, k TEXT NOT NULL, PRIMARY KEY (run_id, g, k)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO spend_run_groups
        SELECT r.run_id, 'repository', ",
        spend_repository!("r.workspace_json", "r.spec_json"),
        "
            FROM runs r JOIN spend_run_last USING (run_id)
        UNION ALL
        SELECT r.run_id, 'workflow', COALESCE(r.workflow_id, 'none')
            FROM runs r JOIN spend_run_last USING (run_id)
        UNION ALL
        SELECT r.run_id, 'tag', COALESCE(t.value, 'none')
            FROM runs r JOIN spend_run_last USING (run_id)
            LEFT JOIN json_each(",
        spend_json!("r.spec_json"),
        ", '$.tags') t;

    ",
        spend_note_days!("SELECT DISTINCT day AS d FROM spend_rows"),
        "
    INSERT INTO spend_run_days SELECT DISTINCT run_id, 'day', day, day FROM spend_rows;
    INSERT INTO spend_run_days
        SELECT run_id, 'model', model, MAX(day) FROM spend_rows GROUP BY run_id, model;
    INSERT INTO spend_run_days
        SELECT run_id, 'provider', provider, MAX(day) FROM spend_rows GROUP BY run_id, provider;

    INSERT INTO spend_totals
        SELECT 'day', day, day, SUM(rep), SUM(est), SUM(unp), SUM(tok), COUNT(*),
            COUNT(DISTINCT run_id)
        FROM spend_rows GROUP BY day;
    INSERT INTO spend_totals
        SELECT 'week', ",
        spend_week!("day"),
        ", day, SUM(rep), SUM(est), SUM(unp), SUM(tok),
            COUNT(*), 0
        FROM spend_rows GROUP BY day;
    INSERT INTO spend_totals
        SELECT 'model', model, day, SUM(rep), SUM(est), SUM(unp), SUM(tok), COUNT(*), 0
        FROM spend_rows GROUP BY model, day;
    INSERT INTO spend_totals
        SELECT 'provider', provider, day, SUM(rep), SUM(est), SUM(unp), SUM(tok), COUNT(*), 0
        FROM spend_rows GROUP BY provider, day;
    INSERT INTO spend_totals
        SELECT 'total', 'total', day, SUM(rep), SUM(est), SUM(unp), SUM(tok), COUNT(*), 0
        FROM spend_rows GROUP BY day;
    INSERT INTO spend_totals
        SELECT g.g, g.k, s.day, SUM(s.rep), SUM(s.est), SUM(s.unp), SUM(s.tok), COUNT(*), 0
        FROM spend_rows s JOIN spend_run_groups g USING (run_id) GROUP BY g.g, g.k, s.day;

    -- Each run, once per group, on its last day there.
    INSERT INTO spend_totals (grp, key, day, reported_usd, estimated_usd, unpriced_rows,
            tokens, usage_rows, runs)
        SELECT g, k, last, 0.0, 0.0, 0, 0, 0, n FROM (
            SELECT 'week' AS g, w AS k, last, COUNT(*) AS n FROM (
                SELECT ",
        spend_week!("day"),
        " AS w, MAX(day) AS last
                FROM spend_rows GROUP BY run_id, w)
            GROUP BY w, last
            UNION ALL
            SELECT 'model', model, last, COUNT(*) FROM (
                SELECT model, MAX(day) AS last FROM spend_rows GROUP BY run_id, model)
            GROUP BY model, last
            UNION ALL
            SELECT 'provider', provider, last, COUNT(*) FROM (
                SELECT provider, MAX(day) AS last FROM spend_rows GROUP BY run_id, provider)
            GROUP BY provider, last
            UNION ALL
            SELECT 'total', 'total', last, COUNT(*) FROM spend_run_last GROUP BY last
            UNION ALL
            SELECT g.g, g.k, l.last, COUNT(*) FROM spend_run_groups g
                JOIN spend_run_last l USING (run_id)
            GROUP BY g.g, g.k, l.last)
        WHERE true
        ON CONFLICT (grp, key, day) DO UPDATE SET runs = runs + excluded.runs;

    DROP TABLE spend_rows;
    DROP TABLE spend_run_last;
    DROP TABLE spend_run_groups;

    CREATE TRIGGER spend_counted AFTER INSERT ON usage
    BEGIN
        ",
        spend_note_days!(concat!("SELECT ", spend_day!("NEW.at"), " AS d")),
        "
        -- A run's last day in a group moves on: it leaves the count of the day it had.
        UPDATE spend_totals SET runs = runs - 1
            WHERE (grp, key, day) IN (SELECT g, k, prev FROM ",
        spend_groups_of_new!(),
        "
                                      WHERE prev < ",
        spend_day!("NEW.at"),
        ");
        INSERT INTO spend_totals (grp, key, day, reported_usd, estimated_usd, unpriced_rows,
                tokens, usage_rows, runs)
            SELECT g, k, d, a.rep, a.est, a.unp, a.tok, 1, (prev IS NULL OR prev < d)
            FROM ",
        spend_groups_of_new!(),
        ",
                (SELECT ",
        spend_day!("NEW.at"),
        " AS d, ",
        spend_amounts!("NEW"),
        ") a
            WHERE true
            ON CONFLICT (grp, key, day) DO UPDATE SET
                reported_usd = reported_usd + excluded.reported_usd,
                estimated_usd = estimated_usd + excluded.estimated_usd,
                unpriced_rows = unpriced_rows + excluded.unpriced_rows,
                tokens = tokens + excluded.tokens,
                usage_rows = usage_rows + 1,
                runs = runs + excluded.runs;
        INSERT INTO spend_run_days (run_id, kind, key, last_day)
            SELECT NEW.run_id, kind, key, d FROM (SELECT ",
        spend_day!("NEW.at"),
        " AS d),
                (SELECT 'day' AS kind, ",
        spend_day!("NEW.at"),
        " AS key
                 UNION ALL SELECT 'model', COALESCE(NEW.model, 'unknown')
                 UNION ALL SELECT 'provider', NEW.provider)
            WHERE true
            ON CONFLICT (run_id, kind, key) DO UPDATE SET
                last_day = MAX(last_day, excluded.last_day);
    END;

    CREATE TRIGGER spend_run_forgotten AFTER DELETE ON runs
    BEGIN
        DELETE FROM spend_run_days WHERE run_id = OLD.run_id;
    END;

    -- A run's repository, workflow or tags changed: its money moves with it.
    CREATE TRIGGER spend_repository_moved AFTER UPDATE OF workspace_json, spec_json ON runs
    WHEN (OLD.workspace_json IS NOT NEW.workspace_json OR OLD.spec_json IS NOT NEW.spec_json)
        AND ",
        spend_repository!("OLD.workspace_json", "OLD.spec_json"),
        "
            IS NOT ",
        spend_repository!("NEW.workspace_json", "NEW.spec_json"),
        "
    BEGIN
        ",
        spend_move_run!(
            "repository",
            concat!(
                "(SELECT ",
                spend_repository!("OLD.workspace_json", "OLD.spec_json"),
                " AS k)"
            ),
            concat!(
                "(SELECT ",
                spend_repository!("NEW.workspace_json", "NEW.spec_json"),
                " AS k)"
            )
        ),
        "
    END;
    CREATE TRIGGER spend_workflow_moved AFTER UPDATE OF workflow_id ON runs
    WHEN OLD.workflow_id IS NOT NEW.workflow_id
    BEGIN
        ",
        spend_move_run!(
            "workflow",
            "(SELECT COALESCE(OLD.workflow_id, 'none') AS k)",
            "(SELECT COALESCE(NEW.workflow_id, 'none') AS k)"
        ),
        "
    END;
    CREATE TRIGGER spend_tags_moved AFTER UPDATE OF spec_json ON runs
    WHEN OLD.spec_json IS NOT NEW.spec_json
        AND ",
        spend_json!("OLD.spec_json"),
        " -> '$.tags'
            IS NOT ",
        spend_json!("NEW.spec_json"),
        " -> '$.tags'
    BEGIN
        ",
        spend_move_run!(
            "tag",
            spend_tags!("OLD.spec_json"),
            spend_tags!("NEW.spec_json")
        ),
        "
    END;
    "
    ),
    // 14: a usage row deleted with its run (the run cap) is taken out of its session's
    // running totals by migration 6's `usage_uncounted`, which counts the run's rows left
    // in that session. Without this index SQLite reads that count through the session's
    // own index: a scan of the whole session's rows for each row deleted. `IF NOT EXISTS`
    // keeps it safe on a file that already has it.
    r#"
    CREATE INDEX IF NOT EXISTS usage_by_run_session ON usage(run_id, budget_session, basis);
    "#,
];

/// The first version that keeps running totals (migration 6): each session's money and
/// the runs by state.
pub const RUNNING_TOTALS: i64 = 6;

/// The first version with the search index as this build reads it (migration 8; a file
/// of version 7 has the index of migration 7, whose documents are laid out otherwise).
pub const SEARCH_INDEX: i64 = 8;

/// The first version whose turns keep their evidence (migration 11; an older file's turns
/// are read with none).
pub const TURN_EVIDENCE: i64 = 11;

/// The first version that keeps spend's running totals (migration 13): a file of an
/// older version is summed from its usage rows.
pub const SPEND_TOTALS: i64 = 13;

/// The schema version this build writes.
pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the file up to [`current_version`]; each migration in its own transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    migrate_to(conn, current_version())
}

/// Brings the file up to `version` (at most [`current_version`]); each migration in its
/// own transaction.
pub fn migrate_to(conn: &mut Connection, version: i64) -> Result<(), LedgerError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > current_version() {
        return Err(LedgerError::TooNew {
            found,
            known: current_version(),
        });
    }
    let upto = usize::try_from(version.min(current_version())).unwrap_or(0);
    for (index, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .take(upto)
        .skip(found as usize)
    {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

/// How a commit reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `synchronous=FULL`: the WAL is synced inside every commit, so a commit that
    /// returned survives a crash of the machine, not only of drover; the next commit waits
    /// for that sync.
    Full,
    /// What the owner uses: SQLite commits without a sync (`synchronous=NORMAL`: a commit
    /// survives a crash of drover at once) and the writer's sync thread syncs the WAL after
    /// each commit, beside the next one; an acknowledgement waits for that sync, so what
    /// drover acknowledges survives a crash of the machine, as with `Full`, while what it
    /// shows needs only the commit (docs/ARCHITECTURE.md §"Commit, then publish").
    #[default]
    Deferred,
    /// `synchronous=NORMAL`: the WAL is synced only at checkpoints; the last commits
    /// before a machine crash (or power loss) can be lost. Kept to measure what `Full`
    /// costs (`benches/ledger.rs` runs both).
    Normal,
}

/// Connection settings every ledger connection uses.
pub fn configure(conn: &Connection, synchronous: Synchronous) -> Result<(), LedgerError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let mode = match synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal | Synchronous::Deferred => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", mode)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}
