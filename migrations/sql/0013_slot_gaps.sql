-- From this version on the bridge confirms its slot only up to a checkpoint it
-- has stored: bounds_slot says so for the stored row. A slot found ahead of
-- such a checkpoint has skipped changes (moved by hand, or a failover to a
-- standby whose copy of it was ahead of the database), and so has a slot
-- found missing while a checkpoint exists.
ALTER TABLE pgimageai.checkpoints ADD COLUMN bounds_slot boolean NOT NULL DEFAULT false;

-- Each time the bridge found that its slot had skipped changes: it backfilled
-- every enabled rule of the slot's group from the rows as they were, and
-- deleted the results of source rows deleted meanwhile (cleaned_at).
CREATE TABLE pgimageai.slot_gaps (
  id          bigserial PRIMARY KEY,
  slot        text NOT NULL,
  detected_at timestamptz NOT NULL DEFAULT now(),
  cause       text NOT NULL CHECK (cause IN ('slot_missing', 'slot_ahead')),
  checkpoint  pg_lsn NOT NULL,          -- where the bridge had stopped
  slot_lsn    pg_lsn NOT NULL,          -- where the slot stood (or was created)
  rules       text[] NOT NULL,          -- the rules that backfilled
  orphans_deleted bigint,               -- target rows whose source row was gone
  cleaned_at  timestamptz               -- NULL until those were deleted
);
CREATE INDEX slot_gaps_slot ON pgimageai.slot_gaps (slot, detected_at DESC);

-- The bridge writes this table at start: a role that may write the bridge's
-- state already (the least-privilege role of the docs) may write it too, so
-- that an upgrade needs no new GRANT.
DO $$
DECLARE
  r regrole;
BEGIN
  FOR r IN
    SELECT DISTINCT a.grantee::regrole
    FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
    WHERE c.oid = 'pgimageai.lane_checkpoints'::regclass
      AND a.privilege_type = 'INSERT' AND a.grantee <> 0 AND a.grantee <> c.relowner
  LOOP
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.slot_gaps TO %s', r);
    EXECUTE format('GRANT USAGE ON SEQUENCE pgimageai.slot_gaps_id_seq TO %s', r);
  END LOOP;
END
$$;
