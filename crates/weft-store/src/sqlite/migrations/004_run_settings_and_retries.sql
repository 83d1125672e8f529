-- Schema 4: the front end's settings a run's effects depend on, and its retries.
ALTER TABLE runs ADD COLUMN settings TEXT;
ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
