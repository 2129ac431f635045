-- The pacing of each model as the leader of a slot last saw it (every few
-- seconds while it runs), for pgimageai status: calls in flight and the
-- adaptive limit, the pace and what set it, 429s in the last minute. Rows of
-- models no longer used by the slot's rules are deleted when it writes.
CREATE TABLE pgimageai.model_pace (
  slot          text NOT NULL,
  model         text NOT NULL,                -- models.name
  in_flight     integer NOT NULL,
  concurrency   integer NOT NULL,             -- the adaptive limit now
  ceiling       integer NOT NULL,             -- max_concurrency
  pace          text NOT NULL,                -- e.g. '19.4 of 20 req/s, by x-ratelimit'; 'not paced'
  limited_1m    integer NOT NULL,             -- 429s (and 503s with Retry-After) in the last minute
  answered_1m   integer NOT NULL,
  waited_s      double precision NOT NULL,    -- total seconds requests waited for their turn
  rate_limited  boolean NOT NULL,             -- a 429 within the last minute
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (slot, model)
);
