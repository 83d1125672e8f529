-- Schema 6: the stored text a run's flow came from.
ALTER TABLE runs ADD COLUMN flow_id TEXT;
