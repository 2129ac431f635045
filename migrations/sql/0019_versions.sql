-- Which version of a rule's computation made each result, and the switch
-- of an AI_IMAGE_EMBED rule (or a versioned AI_IMAGE_COMPLETE rule) from one
-- version to the next, computed on the side and switched in one target
-- transaction.

-- A version: what changes a rule's results — the function, the provider,
-- its base URL, the provider's model id, the options that change outputs
-- (every option but pacing, cost and batching ones) and the prompt. The id
-- is a digest of those; model_row is the whole models row as last run with
-- this version (api_key_env names a variable, it is never a key), from which
-- the bridge runs the old version while a switch computes the new one.
CREATE TABLE pgimageai.versions (
  id           text PRIMARY KEY,
  function     text NOT NULL,
  model        text NOT NULL,       -- models.name
  provider     text NOT NULL,
  base_url     text,
  model_id     text NOT NULL,       -- models.model
  options      jsonb NOT NULL,      -- the output-changing options
  prompt       text,
  model_row    jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz NOT NULL DEFAULT now()
);

-- The version of each stored result; NULL for results stored before
-- versions were recorded.
ALTER TABLE pgimageai.results ADD COLUMN version text;

-- The version each rule's live column holds (set when the rule first runs,
-- and by the switch transaction).
CREATE TABLE pgimageai.rule_versions (
  rule       text PRIMARY KEY,
  version    text NOT NULL,
  since      timestamptz NOT NULL DEFAULT now()
);

-- A running switch: the new version is computed by a side rule (side_rule,
-- the name its results, errors and backfill rows carry) into shadow_column
-- of the same target table, while the live column keeps from_version.
CREATE TABLE pgimageai.switches (
  rule          text PRIMARY KEY,
  from_version  text NOT NULL,
  to_version    text NOT NULL,
  side_rule     text NOT NULL,
  target_table  text NOT NULL,
  live_column   text NOT NULL,
  shadow_column text NOT NULL,
  state         text NOT NULL DEFAULT 'computing'
                CHECK (state IN ('computing', 'indexing', 'ready', 'held', 'aborted')),
  detail        text,               -- why held or aborted
  request       text CHECK (request IN ('force', 'abort')),  -- an operator's, read by the bridge
  started_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- The names the bridge gives: it never drops a column named otherwise.
  CHECK (side_rule = rule || '@' || left(to_version, 8)),
  CHECK (right(shadow_column, length(left(to_version, 8)) + 3) = '__v' || left(to_version, 8))
);

-- Switches that ended: switched (or forced), aborted by an operator, or
-- cancelled by another change of the rule.
CREATE TABLE pgimageai.switch_history (
  id            bigserial PRIMARY KEY,
  rule          text NOT NULL,
  from_version  text NOT NULL,
  to_version    text NOT NULL,
  outcome       text NOT NULL CHECK (outcome IN ('switched', 'forced', 'aborted', 'cancelled')),
  rows_switched bigint,             -- results of the new version when it switched
  lock_ms       double precision,   -- how long the switch transaction held its lock
  started_at    timestamptz NOT NULL,
  ended_at      timestamptz NOT NULL DEFAULT now()
);

-- How a rule's change of version is applied: 'versioned' (computed on the
-- side, switched in one transaction) or 'in_place' (rows overwritten as they
-- are computed again). NULL: versioned for AI_IMAGE_EMBED, in place for
-- AI_IMAGE_COMPLETE.
ALTER TABLE pgimageai.rules ADD COLUMN switch text CHECK (switch IN ('versioned', 'in_place'));

SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.versions, pgimageai.rule_versions, pgimageai.switches, pgimageai.switch_history TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT USAGE ON SEQUENCE pgimageai.switch_history_id_seq TO %s');
