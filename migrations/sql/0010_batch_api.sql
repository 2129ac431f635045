-- Backfills through a provider's Batch API (model option batch_api): the
-- batches of a rule's backfill, so that a restart resumes
-- polling them instead of submitting again, and the answers downloaded from
-- them, which the backfill's pages then apply with its version guard.
CREATE TABLE pgimageai.backfill_batches (
  rule           text NOT NULL REFERENCES pgimageai.backfills (rule) ON DELETE CASCADE,
  seq            integer NOT NULL,           -- 1, 2, … in key order
  fingerprint    text NOT NULL,              -- of the rule when submitted; another one starts over
  last_key       jsonb,                      -- the last source row the batch's collection read
  final          boolean NOT NULL DEFAULT false,  -- the collection reached the backfill's stop key
  requests       integer NOT NULL,           -- lines of its input file; 0: nothing to ask (no batch)
  input_file_id  text,
  batch_id       text,                       -- NULL until created
  status         text NOT NULL,              -- uploaded, then the provider's status; empty when requests = 0
  completed      integer NOT NULL DEFAULT 0,
  failed         integer NOT NULL DEFAULT 0,
  output_file_id text,
  error_file_id  text,
  downloaded     boolean NOT NULL DEFAULT false,  -- its answers are in pgimageai.batch_answers
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (rule, seq)
);
-- One answer per rule and row: what the batch answered for the input it was
-- asked about (input_key, as in pgimageai.results); a row whose input changed
-- since gets no use of it. Deleted when the backfill is done.
CREATE TABLE pgimageai.batch_answers (
  rule              text NOT NULL,
  source_key        jsonb NOT NULL,
  input_key         bytea NOT NULL,
  answer            text,                    -- NULL with a reason
  prompt_tokens     integer NOT NULL DEFAULT 0,
  completion_tokens integer NOT NULL DEFAULT 0,
  reason            text,                    -- provider_error, bad_response
  detail            text,
  status            integer,                 -- HTTP status of a failed line
  PRIMARY KEY (rule, source_key)
);
