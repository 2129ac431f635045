-- The bridge's grants in the Compose files (service "configure", after migrate and after
-- configure*.sql made public.photos): the least-privilege block of docs/operations.md,
-- but for CREATE ROLE, which deploy/compose/initdb/pgimageai.sh ran at the first start,
-- and with the publication made only when it is missing. Idempotent: compose may run it
-- again. deploy/compose_test.go checks that it holds every statement of the docs' block.
-- configuration: read; state: read and write
GRANT USAGE ON SCHEMA pgimageai TO pgimageai_bridge;
GRANT SELECT ON pgimageai.rules, pgimageai.models, pgimageai.retry_requests, pgimageai.retention,
  pgimageai.error_caps TO pgimageai_bridge;
GRANT INSERT ON pgimageai.retry_requests TO pgimageai_bridge; -- it retries budget_exhausted rows on a new day
GRANT UPDATE (seen_lsn), DELETE ON pgimageai.retry_requests TO pgimageai_bridge; -- retention of served requests
GRANT SELECT, INSERT, UPDATE, DELETE
  ON pgimageai.errors, pgimageai.checkpoints, pgimageai.lane_checkpoints, pgimageai.backfills, pgimageai.usage,
     pgimageai.own_xacts, pgimageai.results, pgimageai.backfill_batches, pgimageai.batch_answers,
     pgimageai.batch_cleanup, pgimageai.model_pace, pgimageai.lane_pending, pgimageai.created_targets, pgimageai.slot_gaps,
     pgimageai.error_counts, pgimageai.versions, pgimageai.rule_versions, pgimageai.switches,
     pgimageai.switch_history, pgimageai.leaders, pgimageai.rule_sources, pgimageai.parked, pgimageai.model_health
  TO pgimageai_bridge;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA pgimageai TO pgimageai_bridge;
-- sources: read
GRANT SELECT ON public.photos TO pgimageai_bridge;
-- targets: created by the bridge in a schema where it may create tables
GRANT USAGE, CREATE ON SCHEMA public TO pgimageai_bridge;
-- the publication: adding a table to one needs the table's ownership, so its owner does it
SELECT 'CREATE PUBLICATION pgimageai FOR TABLE public.photos, pgimageai.rules, pgimageai.models,
  pgimageai.retry_requests WITH (publish_via_partition_root = true)'
WHERE NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'pgimageai') \gexec
