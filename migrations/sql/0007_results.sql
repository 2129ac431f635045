-- What each result was computed from (never pay twice for the same
-- image): per rule and source row, a digest of (function, model row, prompt as
-- rendered, image bytes), written in the same target transaction as the
-- result. A change whose digest equals the stored one makes no call — after a
-- restart, for tables of any size, after a key move (the row moves), and in a
-- backfill of unchanged rows (recover-slot, a re-enabled rule).
CREATE TABLE pgimageai.results (
  rule       text NOT NULL,
  source_key jsonb NOT NULL,
  input_key  bytea NOT NULL,
  PRIMARY KEY (rule, source_key)
);
