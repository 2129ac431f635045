-- Budgets per model: a row that would call a model whose daily
-- budget is spent gets an errors row with the new reason budget_exhausted.
-- The check of 0001 is named by PostgreSQL's default, errors_reason_check.
ALTER TABLE pgimageai.errors DROP CONSTRAINT errors_reason_check;
ALTER TABLE pgimageai.errors ADD CONSTRAINT errors_reason_check CHECK (reason IN ('empty_image', 'unknown_format',
  'too_large', 'unsupported_format', 'provider_error', 'bad_response', 'invalid_rule', 'budget_exhausted'));
