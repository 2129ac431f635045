-- Control is a privilege: nothing that a role which may only write a
-- source table can do steers the bridge.
--
-- A retry request is a row here, in the publication like pgimageai.rules: the
-- bridge reprocesses the rows behind the matching open errors at the WAL
-- position of the INSERT. Only roles granted INSERT on it (operators) can ask.
CREATE TABLE pgimageai.retry_requests (
  id           bigserial PRIMARY KEY,
  rule         text,                 -- NULL: every rule
  reason       text,                 -- NULL: every reason but invalid_rule
  requested_by text NOT NULL DEFAULT current_user,
  requested_at timestamptz NOT NULL DEFAULT now()
);

-- The bridge's own write-back transactions (target = a published source
-- table), by transaction ID, written in the same transaction as the results:
-- the bridge skips exactly these when it reads them back from the WAL, so that
-- write-back never loops, and no other transaction can pass for one.
CREATE TABLE pgimageai.own_xacts (
  xid        bigint PRIMARY KEY,     -- txid_current(): epoch and transaction ID
  created_at timestamptz NOT NULL DEFAULT now()
);
