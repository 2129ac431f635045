-- Backfill progress per rule (a new or re-enabled rule processes the
-- rows that already exist). Written in the same target transaction as the
-- results of each page, so a restart resumes after the last page applied.
CREATE TABLE pgimageai.backfills (
  rule        text PRIMARY KEY,
  state       text NOT NULL CHECK (state IN ('running', 'done')),
  last_key    jsonb,                 -- primary key of the last row processed; NULL before the first page
  stop_key    jsonb,                 -- the greatest key when the backfill started: later rows are streamed
  rows_done   bigint NOT NULL DEFAULT 0,
  rows_total  bigint,                -- estimate taken when the backfill started
  started_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  fingerprint text NOT NULL DEFAULT ''  -- what the rule computed; a change restarts the backfill
);
