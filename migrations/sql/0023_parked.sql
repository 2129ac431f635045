-- Rows parked while their model is down (an outage: every request refused,
-- reset, timed out or answered with a 5xx). A parked row is written in the
-- same target transaction as the lane's checkpoint that moves past it, so
-- the slot goes on advancing during an outage; when the model answers
-- again, the bridge sends every parked row again by itself, in order of
-- seq (arrival), from the source row as it is then.
--
-- One row per rule and source row: a newer change of a parked row parks
-- in its place (a new seq), and any result, NULL or errors row written for
-- the row deletes it. The target row keeps what it held meanwhile.
CREATE TABLE pgimageai.parked (
  rule         text NOT NULL,
  source_key   jsonb NOT NULL,
  source_table text NOT NULL,
  model        text NOT NULL,        -- models.name, when it parked
  seq          bigserial NOT NULL,   -- order of arrival
  lsn          pg_lsn NOT NULL,      -- the change that parked it
  cause        text,                 -- what the model's last failed request said
  attempts     integer NOT NULL DEFAULT 1,  -- times it parked (probes and replays included)
  parked_at    timestamptz NOT NULL DEFAULT now(),  -- when the row first parked
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (rule, source_key)
);
CREATE UNIQUE INDEX parked_seq ON pgimageai.parked (seq);

-- Each model's circuit, as a slot's leader last changed it: down since when
-- (and why), or up again since when. The bridge writes a row when the
-- circuit opens or closes; a bridge started during an outage finds its
-- models down here and probes them first.
CREATE TABLE pgimageai.model_health (
  slot       text NOT NULL,
  model      text NOT NULL,
  state      text NOT NULL CHECK (state IN ('up', 'down')),
  since      timestamptz NOT NULL,   -- down: since when; up: since when again
  down_since timestamptz,            -- up: when the last outage began
  cause      text,                   -- down: what the last failed request said
  probes     integer NOT NULL DEFAULT 0,  -- up: probes the last outage took
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (slot, model)
);

SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.parked, pgimageai.model_health TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT USAGE ON SEQUENCE pgimageai.parked_seq_seq TO %s');
