-- Schema 2: the session, user and project a run belongs to (and the scoped table,
-- made by the schema itself).
ALTER TABLE runs ADD COLUMN scopes TEXT;
