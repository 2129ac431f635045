-- Progress per lane: a lane is a target table, and the rules that
-- write it apply their changes in source commit order. Each lane stores how
-- far it has applied the stream, as the commit LSN of a source transaction
-- and the ordinal of a change inside it, in the same target transaction as
-- the results: a big transaction is written in chunks, and a restart resumes
-- after the last chunk of each lane. The slot is confirmed at what every lane
-- has made durable (pgimageai.checkpoints).
CREATE TABLE pgimageai.lane_checkpoints (
  slot        text NOT NULL,
  lane        text NOT NULL,        -- the target table, as PostgreSQL writes a regclass
  lsn         pg_lsn NOT NULL,      -- commit LSN of the source transaction
  ord         bigint NOT NULL,      -- position of the last applied change inside it
  commit_time timestamptz,          -- source commit time of that transaction
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (slot, lane)
);

-- The call behind a permanent failure (identical work is done once):
-- a digest of (function, model row, prompt, image bytes). A restart reads the
-- open ones back, so that a row whose answer was unusable is not paid for
-- again until the model or prompt changes or pgimageai retry asks for it.
ALTER TABLE pgimageai.errors ADD COLUMN input_key bytea;
