-- A retry request may name one source row: its source_key, with the rule
-- (the web console's "retry" of one error). NULL, as before: every row of
-- the rule and reason.
ALTER TABLE pgimageai.retry_requests ADD COLUMN source_key jsonb;
ALTER TABLE pgimageai.retry_requests ADD CONSTRAINT retry_requests_row_has_rule
  CHECK (source_key IS NULL OR rule IS NOT NULL);
