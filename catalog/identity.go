package catalog

import (
	"context"
	"fmt"
	"slices"
)

// ReplicaIdentity is a table's REPLICA IDENTITY as pg_class.relreplident
// stores it (https://www.postgresql.org/docs/current/sql-altertable.html#SQL-ALTERTABLE-REPLICA-IDENTITY).
type ReplicaIdentity byte

// The replica identities.
const (
	IdentityDefault ReplicaIdentity = 'd' // the primary key, if any
	IdentityNothing ReplicaIdentity = 'n'
	IdentityFull    ReplicaIdentity = 'f' // the whole old row
	IdentityIndex   ReplicaIdentity = 'i' // USING INDEX: a unique index's columns
)

// String returns the identity as ALTER TABLE ... REPLICA IDENTITY writes it.
func (r ReplicaIdentity) String() string {
	switch r {
	case IdentityDefault:
		return "DEFAULT"
	case IdentityNothing:
		return "NOTHING"
	case IdentityFull:
		return "FULL"
	case IdentityIndex:
		return "USING INDEX"
	}
	return fmt.Sprintf("relreplident %q", byte(r))
}

// Identity is how a table identifies its rows to logical replication, and
// the key the bridge derives from it: the one place a rule's key columns
// come from (source_key, target keys, deletes and key moves, backfill
// pages, retries). It is immutable.
type Identity struct {
	Kind ReplicaIdentity
	// Index is the USING INDEX index (Kind IdentityIndex) while it exists.
	Index string
	// Key is the columns that identify a row, in key order: the primary key
	// for DEFAULT and FULL, the index's key columns for USING INDEX; empty
	// when the identity carries no key (NOTHING, DEFAULT without a primary
	// key, USING INDEX whose index is gone, FULL without a primary key).
	Key []string
	// Usable is true when PostgreSQL can log the old row of an UPDATE or
	// DELETE: a table published for them without that makes the
	// application's own UPDATE and DELETE fail (SQLSTATE 55000). FULL is
	// usable without a key.
	Usable bool
	// Candidate is a unique index that REPLICA IDENTITY USING INDEX could
	// name (valid, immediate, not partial, no expression, every key column
	// NOT NULL), for the message that says how to fix a table without a
	// key; "" when there is none.
	Candidate string
	// PrimaryKey is true when the table has a primary key.
	PrimaryKey bool
	// Partition names a partition of a partitioned table whose own
	// identity is unusable (updates and deletes of its rows would fail once
	// the table is published); "" when there is none.
	Partition string
}

// Problem returns why a rule cannot key the rows of table t by its replica
// identity, with the statement that fixes it; "" when it can.
func (id Identity) Problem(t *Table) string {
	if id.Partition != "" {
		return fmt.Sprintf("source table %s cannot be followed: its partition %s has a replica identity that carries no key, so publishing it would make its UPDATEs and DELETEs fail; give the partition a primary key or run: ALTER TABLE %s REPLICA IDENTITY USING INDEX <a unique index on NOT NULL columns>",
			t.Regclass, id.Partition, id.Partition)
	}
	if len(id.Key) > 0 {
		return ""
	}
	name := t.Regclass
	fix := func() string {
		switch {
		case id.PrimaryKey:
			return fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT", name)
		case id.Candidate != "":
			return fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s", name, QuoteIdent(id.Candidate))
		}
		return fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (<the columns that identify a row>)", name)
	}
	const noKey = "so its changes carry no key to match results by"
	var why string
	switch {
	case id.Kind == IdentityNothing:
		why = "its replica identity is NOTHING, " + noKey
	case id.Kind == IdentityIndex:
		why = "its replica identity index is gone, " + noKey
	case id.Kind == IdentityFull:
		why = "its replica identity is FULL and it has no primary key to match results by"
	default:
		why = "it has no primary key and its replica identity is DEFAULT, " + noKey
	}
	return fmt.Sprintf("source table %s cannot be followed: %s; run: %s", name, why, fix())
}

// identitySQL reads the replica identity of each table of $1: its kind, the
// primary key's columns, the identity index's name and columns, and an
// index that could be the identity. An index counts as PostgreSQL's relcache
// counts it (RelationGetIndexList): valid (or on a partitioned table),
// unique, immediate and not partial; only its key columns (not INCLUDE).
const identitySQL = `
WITH ix AS (
  SELECT i.indrelid, i.indexrelid, i.indisprimary, i.indisreplident, ic.relname,
         (SELECT pg_catalog.array_agg(a.attname ORDER BY k.ord)
            FROM pg_catalog.unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
           WHERE k.ord <= i.indnkeyatts) AS cols,
         NOT EXISTS (SELECT FROM pg_catalog.unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                      LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                     WHERE k.ord <= i.indnkeyatts AND (k.attnum = 0 OR NOT a.attnotnull)) AS notnull
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
  JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
  WHERE i.indrelid = ANY($1::oid[])
    AND (i.indisvalid OR c.relkind = 'p') AND i.indisunique AND i.indimmediate AND i.indpred IS NULL
)
SELECT c.oid, c.relreplident::text,
       (SELECT cols FROM ix WHERE ix.indrelid = c.oid AND ix.indisprimary),
       (SELECT relname FROM ix WHERE ix.indrelid = c.oid AND ix.indisreplident),
       (SELECT cols FROM ix WHERE ix.indrelid = c.oid AND ix.indisreplident),
       (SELECT relname FROM ix WHERE ix.indrelid = c.oid AND ix.notnull AND NOT ix.indisprimary
         ORDER BY pg_catalog.array_length(ix.cols, 1), ix.relname LIMIT 1),
       (SELECT pg_catalog.quote_ident(ln.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(l.relname)
          FROM pg_catalog.pg_partition_tree(c.oid) AS pt
          JOIN pg_catalog.pg_class l ON l.oid = pt.relid
          JOIN pg_catalog.pg_namespace ln ON ln.oid = l.relnamespace
         WHERE c.relkind = 'p' AND pt.isleaf AND l.relreplident <> 'f'
           AND NOT EXISTS (SELECT FROM pg_catalog.pg_index li
                            WHERE li.indrelid = l.oid AND li.indisvalid AND li.indisunique AND li.indimmediate AND li.indpred IS NULL
                              AND CASE l.relreplident WHEN 'd' THEN li.indisprimary WHEN 'i' THEN li.indisreplident ELSE false END)
         ORDER BY 1 LIMIT 1)
FROM pg_catalog.pg_class c WHERE c.oid = ANY($1::oid[])`

// Identities reads the replica identity of the tables oids (a table that
// does not exist is missing from the map). One round trip for them all: the
// bridge re-validates its published tables with it.
func Identities(ctx context.Context, q Querier, oids []uint32) (map[uint32]Identity, error) {
	rows, err := q.Query(ctx, identitySQL, oids)
	if err != nil {
		return nil, fmt.Errorf("replica identities: %w", err)
	}
	defer rows.Close()
	out := make(map[uint32]Identity, len(oids))
	for rows.Next() {
		var oid uint32
		var kind string
		var pk, idxCols []string
		var idx, candidate, partition *string
		if err := rows.Scan(&oid, &kind, &pk, &idx, &idxCols, &candidate, &partition); err != nil {
			return nil, fmt.Errorf("replica identities: %w", err)
		}
		id := Identity{Kind: ReplicaIdentity(kind[0]), PrimaryKey: len(pk) > 0}
		if candidate != nil {
			id.Candidate = *candidate
		}
		switch id.Kind {
		case IdentityDefault:
			id.Key, id.Usable = pk, len(pk) > 0
		case IdentityFull:
			id.Key, id.Usable = pk, true
		case IdentityIndex:
			if idx != nil {
				id.Index, id.Key, id.Usable = *idx, idxCols, true
			}
		}
		if partition != nil {
			id.Partition, id.Usable = *partition, false
		}
		out[oid] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replica identities: %w", err)
	}
	return out, nil
}

// Equal reports whether two identities key rows the same way.
func (id Identity) Equal(o Identity) bool {
	return id.Kind == o.Kind && id.Index == o.Index && id.Usable == o.Usable && id.Partition == o.Partition && slices.Equal(id.Key, o.Key)
}

// identity reads t's replica identity into t.Identity.
func identity(ctx context.Context, q Querier, t *Table) error {
	ids, err := Identities(ctx, q, []uint32{t.OID})
	if err != nil {
		return fmt.Errorf("table %s: %w", t, err)
	}
	id, ok := ids[t.OID]
	if !ok {
		return fmt.Errorf("table %s: %w", t, ErrNoTable)
	}
	t.Identity = id
	return nil
}

// Key returns the columns that identify t's rows: its replica identity's
// key (Identity.Key). The caller must not change the slice.
func (t *Table) Key() []string { return t.Identity.Key }

// domainSQL resolves the domain-typed columns of $1 to the type under their
// domains, at any depth.
const domainSQL = `
WITH RECURSIVE d(attname, typ, base) AS (
  SELECT a.attname, t.oid, t.typbasetype
  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND t.typtype = 'd'
  UNION ALL
  SELECT d.attname, t.oid, t.typbasetype FROM d JOIN pg_catalog.pg_type t ON t.oid = d.base
)
SELECT attname, typ FROM d WHERE base = 0`

// domains sets each column's Underlying type.
func domains(ctx context.Context, q Querier, t *Table) error {
	for i := range t.Columns {
		t.Columns[i].Underlying = t.Columns[i].TypeOID
	}
	rows, err := q.Query(ctx, domainSQL, t.OID)
	if err != nil {
		return fmt.Errorf("domains of %s: %w", t, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var base uint32
		if err := rows.Scan(&name, &base); err != nil {
			return fmt.Errorf("domains of %s: %w", t, err)
		}
		for i := range t.Columns {
			if t.Columns[i].Name == name {
				t.Columns[i].Underlying = base
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("domains of %s: %w", t, err)
	}
	return nil
}
