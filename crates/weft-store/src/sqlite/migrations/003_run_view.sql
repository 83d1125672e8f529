-- Schema 3: how the flow's dialect presents the run.
ALTER TABLE runs ADD COLUMN view TEXT;
