-- Schema 9: the rows of `journal` (schema 1 to 8) as chunks of one entry each, in the
-- order they were appended.
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
    key TEXT NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
INSERT INTO journal_chunks (run_id, results, entries)
    SELECT run_id, kind = 'result',
           json_array(json_object('key', key, 'kind', kind, 'value', json(value)))
    FROM journal ORDER BY seq;
DROP TABLE journal;
