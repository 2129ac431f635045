-- Why each model's concurrency limit is where it is, for pgimageai status:
-- 'ceiling', 'server slots', 'server queue', 'latency per token',
-- '429 backoff', 'slow start', 'adaptive_concurrency false'.
ALTER TABLE pgimageai.model_pace ADD COLUMN concurrency_by text NOT NULL DEFAULT '';
