-- How long the bridge's leader keeps bookkeeping rows that nothing reads any
-- more; it deletes older ones in small batches every 10 minutes. keep NULL =
-- for good. Change with e.g.
--   UPDATE pgimageai.retention SET keep = '90 days' WHERE what = 'resolved_errors';
CREATE TABLE pgimageai.retention (
  what text PRIMARY KEY CHECK (what IN ('resolved_errors', 'usage', 'own_xacts', 'model_pace')),
  keep interval CHECK (keep >= interval '0')
);
INSERT INTO pgimageai.retention (what, keep) VALUES
  ('resolved_errors', '30 days'),   -- errors rows resolved that long ago
  ('usage', '400 days'),            -- pgimageai.usage days older than that
  ('own_xacts', '7 days'),          -- the bridge's own write-back transactions
  ('model_pace', '1 day');          -- pacing of models no run has reported since
