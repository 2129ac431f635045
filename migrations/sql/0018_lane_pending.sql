-- What each lane of a slot holds, as the slot's leader last saw it (stored
-- every 5 seconds): pgimageai status shows how many changes wait and the age
-- of the oldest, so that a lane that holds the slot is named.
CREATE TABLE pgimageai.lane_pending (
  slot               text NOT NULL,
  lane               text NOT NULL,
  pending            bigint NOT NULL,      -- changes routed to the lane and not yet written
  oldest_commit_time timestamptz,          -- source commit time of the oldest; NULL when none
  updated_at         timestamptz NOT NULL,
  PRIMARY KEY (slot, lane)
);

-- The bridge writes this table: a role that may write the bridge's state
-- already (the least-privilege role of the docs) may write it too, so that
-- an upgrade needs no new GRANT.
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
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.lane_pending TO %s', r);
  END LOOP;
END
$$;
