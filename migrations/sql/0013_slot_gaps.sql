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

-- pgimageai.grant_to_bridge_roles(stmt) runs stmt, a GRANT with one %s for
-- the role, for every role that may write the bridge's state already: those
-- with INSERT on pgimageai.lane_checkpoints, its owner aside (the
-- least-privilege role of the docs). A migration that adds a table the bridge
-- writes calls it, so that an upgrade needs no new GRANT. It runs with the
-- rights of its caller, and only its owner (the role that migrates) may call it.
CREATE FUNCTION pgimageai.grant_to_bridge_roles(stmt text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  r regrole;
BEGIN
  FOR r IN
    SELECT DISTINCT a.grantee::regrole
    FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
    WHERE c.oid = 'pgimageai.lane_checkpoints'::regclass
      AND a.privilege_type = 'INSERT' AND a.grantee <> 0 AND a.grantee <> c.relowner
  LOOP
    EXECUTE format(stmt, r);
  END LOOP;
END
$$;
REVOKE EXECUTE ON FUNCTION pgimageai.grant_to_bridge_roles(text) FROM PUBLIC;

-- The bridge writes slot_gaps at start.

SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.slot_gaps TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT USAGE ON SEQUENCE pgimageai.slot_gaps_id_seq TO %s');
