-- Schema 8: the rows of `events` (schema 5 to 7) as chunks of one event each.
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
INSERT OR IGNORE INTO event_chunks (run_id, first_seq, last_seq, body)
    SELECT run_id, seq, seq, '[' || json_set(body, '$.seq', seq) || ']' FROM events;
DROP TABLE events;
