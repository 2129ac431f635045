-- Backfills through a Batch API, batch by batch: the answers of a batch are
-- applied as soon as it finishes (applied_key and applied record how far its
-- range of rows got), the daily budget counts the requests waiting in
-- batches also after a restart (model), and the batches of a backfill that
-- was given up — its rule deleted, disabled or changed, or its target table
-- made again — are cancelled and their files deleted at the provider, also
-- when the bridge stops in between (batch_cleanup).
ALTER TABLE pgimageai.backfill_batches
  ADD COLUMN model       text,                            -- models.name its requests were counted against
  ADD COLUMN applied_key jsonb,                           -- the last source row of its range applied
  ADD COLUMN applied     boolean NOT NULL DEFAULT false;  -- every row of its range applied
-- The batches of given-up backfills, until the provider has cancelled them
-- and deleted their files.
CREATE TABLE pgimageai.batch_cleanup (
  id         bigserial PRIMARY KEY,
  rule       text NOT NULL,
  model      text,                -- models.name whose provider holds the batch; NULL: unknown
  batch_id   text,                -- NULL: never recorded; looked for by its input file
  input_file_id text,
  files      text[] NOT NULL,     -- input, output and error files to delete
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The bridge writes batch_cleanup: a role that may write the bridge's state
-- already (the least-privilege role of the docs) may write it too, so that
-- an upgrade needs no new GRANT.
SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.batch_cleanup TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT USAGE ON SEQUENCE pgimageai.batch_cleanup_id_seq TO %s');
