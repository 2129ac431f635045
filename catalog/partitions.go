package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Leaf is one leaf partition of a partitioned table: its OID, its
// relfilenode (which TRUNCATE, VACUUM FULL, CLUSTER and a rewriting ALTER
// TABLE change), and its name.
type Leaf struct {
	OID, Filenode uint32
	Ident         pgx.Identifier
}

// Shape is what a source table is now in the catalog: the OID its name
// resolves to (0: none — dropped or renamed), and, for a partitioned table,
// its leaf partitions at any depth (pg_partition_tree), in OID order.
type Shape struct {
	OID    uint32
	Leaves []Leaf
}

// ShapeOf returns the shape of the table that was oid and is named name
// (as its Regclass). Partition DDL — ATTACH, DETACH, DROP of a partition,
// and TRUNCATE of a partition, which pgoutput does not send for a table
// published through its root — changes the leaves; a table dropped and
// created again under its name changes the OID.
func ShapeOf(ctx context.Context, q Querier, oid uint32, name string) (Shape, error) {
	var s Shape
	var now *uint32
	if err := q.QueryRow(ctx, "SELECT to_regclass($1)::oid", name).Scan(&now); err != nil {
		return s, fmt.Errorf("look up table %s: %w", name, err)
	}
	if now == nil || *now != oid {
		if now != nil {
			s.OID = *now
		}
		return s, nil
	}
	s.OID = oid
	rows, err := q.Query(ctx, `SELECT c.oid, c.relfilenode, n.nspname, c.relname
FROM pg_partition_tree($1::oid::regclass) AS t
JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.isleaf AND t.relid <> $1::oid::regclass
ORDER BY c.oid`, oid)
	if err != nil {
		return s, fmt.Errorf("partitions of %s: %w", name, err)
	}
	s.Leaves, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Leaf, error) {
		var l Leaf
		var schema, rel string
		err := r.Scan(&l.OID, &l.Filenode, &schema, &rel)
		l.Ident = pgx.Identifier{schema, rel}
		return l, err
	})
	if err != nil {
		return s, fmt.Errorf("partitions of %s: %w", name, err)
	}
	return s, nil
}

// ShapeChange is how a table's leaves changed between two shapes.
type ShapeChange struct {
	Attached  []Leaf // leaves that are new: their rows are new to the table
	Gone      []Leaf // leaves detached or dropped: their rows left it
	Rewritten []Leaf // same leaf, new relfilenode: truncated (or rewritten)
}

// Empty reports whether nothing changed.
func (c ShapeChange) Empty() bool {
	return len(c.Attached) == 0 && len(c.Gone) == 0 && len(c.Rewritten) == 0
}

// Diff returns how the leaves changed from s to now.
func (s Shape) Diff(now Shape) ShapeChange {
	var c ShapeChange
	before := map[uint32]Leaf{}
	for _, l := range s.Leaves {
		before[l.OID] = l
	}
	for _, l := range now.Leaves {
		old, ok := before[l.OID]
		switch {
		case !ok:
			c.Attached = append(c.Attached, l)
		case old.Filenode != l.Filenode:
			c.Rewritten = append(c.Rewritten, l)
		}
		delete(before, l.OID)
	}
	for _, l := range s.Leaves {
		if _, ok := before[l.OID]; ok {
			c.Gone = append(c.Gone, l)
		}
	}
	return c
}
