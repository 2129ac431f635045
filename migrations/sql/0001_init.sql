-- pgimageai configuration and bookkeeping.

CREATE TABLE pgimageai.models (
  name        text PRIMARY KEY CHECK (name <> ''),
  provider    text NOT NULL DEFAULT 'openai' CHECK (provider <> ''),
  base_url    text,
  model       text NOT NULL,
  -- The NAME of an environment variable, never a key: a value such as
  -- 'sk-...' is rejected by the pattern.
  api_key_env text CHECK (api_key_env ~ '^[A-Za-z_][A-Za-z0-9_]*$'),
  options     jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(options) = 'object')
);

COMMENT ON COLUMN pgimageai.models.api_key_env IS
  'Name of the environment variable that holds the API key; keys never live in tables';

CREATE TABLE pgimageai.rules (
  name          text PRIMARY KEY CHECK (name <> ''),
  source_table  text NOT NULL CHECK (source_table <> ''),
  image_column  text NOT NULL CHECK (image_column <> ''),
  function      text NOT NULL CHECK (function IN ('AI_IMAGE_COMPLETE', 'AI_IMAGE_EMBED')),
  model         text NOT NULL REFERENCES pgimageai.models (name) ON UPDATE CASCADE,
  prompt        text,
  target_table  text NOT NULL CHECK (target_table <> ''),
  target_column text NOT NULL CHECK (target_column <> ''),
  enabled       boolean NOT NULL DEFAULT true,
  CONSTRAINT rules_prompt_check CHECK (
    (function = 'AI_IMAGE_COMPLETE' AND prompt IS NOT NULL) OR
    (function = 'AI_IMAGE_EMBED' AND prompt IS NULL)),
  -- Two rules writing one column would overwrite each other.
  CONSTRAINT rules_target_unique UNIQUE (target_table, target_column)
);

COMMENT ON CONSTRAINT rules_prompt_check ON pgimageai.rules IS
  'AI_IMAGE_COMPLETE needs a prompt; AI_IMAGE_EMBED takes none';

CREATE TABLE pgimageai.errors (
  id           bigserial PRIMARY KEY,
  rule         text NOT NULL,
  source_table text NOT NULL,
  source_key   jsonb NOT NULL,
  reason       text NOT NULL CHECK (reason IN ('empty_image', 'unknown_format', 'too_large',
                 'unsupported_format', 'provider_error', 'bad_response', 'invalid_rule')),
  detail       text NOT NULL,
  image_bytes  integer,
  image_head   bytea CHECK (octet_length(image_head) <= 16),
  lsn          pg_lsn,
  attempts     integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
  created_at   timestamptz NOT NULL DEFAULT now(),
  resolved_at  timestamptz
);

-- At most one open error per rule and source row (an invalid rule has key {}):
-- a row that fails again bumps attempts instead of piling up rows.
CREATE UNIQUE INDEX errors_open_key ON pgimageai.errors (rule, source_key) WHERE resolved_at IS NULL;
CREATE INDEX errors_open_reason ON pgimageai.errors (reason) WHERE resolved_at IS NULL;

CREATE TABLE pgimageai.checkpoints (
  slot       text PRIMARY KEY,
  lsn        pg_lsn NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
