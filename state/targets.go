package state

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// RecordCreatedTarget records table relid as created by the bridge, in tx:
// the transaction of its CREATE TABLE, so that the record exists exactly when
// the table does. Rows of tables since dropped are deleted (their OIDs may
// be used again one day).
func RecordCreatedTarget(ctx context.Context, tx pgx.Tx, relid uint32) error {
	if _, err := tx.Exec(ctx, `DELETE FROM pgimageai.created_targets c
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid = c.relid)`); err != nil {
		return fmt.Errorf("record created target: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pgimageai.created_targets (relid) VALUES ($1::oid::regclass)
ON CONFLICT (relid) DO UPDATE SET created_at = now()`, relid); err != nil {
		return fmt.Errorf("record created target: %w", err)
	}
	return nil
}

// CreatedTarget reports whether the bridge created table relid (see
// RecordCreatedTarget), so that it may widen its key columns.
func CreatedTarget(ctx context.Context, q Querier, relid uint32) (bool, error) {
	var created bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgimageai.created_targets WHERE relid = $1::oid::regclass)`, relid).Scan(&created); err != nil {
		return false, fmt.Errorf("created targets: %w", err)
	}
	return created, nil
}

// SourceTable reports whether some rule of the database behind q, of any
// group, enabled or not, reads table relid: the bridge never alters a table
// that a rule reads, even one it created as another rule's target.
func SourceTable(ctx context.Context, q Querier, relid uint32) (bool, error) {
	var source bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgimageai.rules WHERE pg_catalog.to_regclass(`+catalog.QualifySQL("source_table")+`) = $1::oid::regclass)`, relid).Scan(&source); err != nil {
		return false, fmt.Errorf("rules' source tables: %w", err)
	}
	return source, nil
}

// CreatedTargets lists the target tables the bridge created (by CREATE TABLE
// of its own, pgimageai.created_targets), as regclass text; tables dropped
// since are left out.
func CreatedTargets(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(r.relname)
FROM pgimageai.created_targets c JOIN pg_catalog.pg_class r ON r.oid = c.relid JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read the targets the bridge created: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the targets the bridge created: %w", err)
	}
	return names, nil
}
