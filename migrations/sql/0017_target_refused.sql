-- A change the target table refused whatever it held (a delete or move that
-- a constraint forbids, a NULL that a NOT NULL column refuses) gets an errors
-- row with the new reason target_refused, and the stream goes on.
ALTER TABLE pgimageai.errors DROP CONSTRAINT errors_reason_check;
ALTER TABLE pgimageai.errors ADD CONSTRAINT errors_reason_check CHECK (reason IN ('empty_image', 'unknown_format',
  'too_large', 'unsupported_format', 'provider_error', 'bad_response', 'invalid_rule', 'budget_exhausted', 'target_refused'));
