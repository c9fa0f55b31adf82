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
    /// `synchronous=FULL`: the WAL is synced at every commit, so a commit that returned
    /// survives a crash of the machine, not only of drover. What the owner uses: drover
    /// shows and acknowledges only what was committed (docs/ARCHITECTURE.md §"Ledger"),
    /// and the writer's group commits keep the syncs few (many events per sync).
    #[default]
    Full,
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
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", mode)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(())
}
