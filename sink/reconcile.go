package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// What reconciliation (bridge/reconcile) asks of a target table. Keys travel
// as a JSON array of source_key objects and are turned back into the key's
// own types by jsonb_populate_record, so that PostgreSQL, not Go, compares
// them; every statement names the key columns, never a value.

// Keyed is what reconciliation knows of a target table: its table, its key
// columns (the rule's, in key order) and the result column it checks.
type Keyed struct {
	Target *Target
	Keys   []KeyColumn
}

func (k Keyed) table() string { return k.Target.Table.Identifier().Sanitize() }

func (k Keyed) list(alias string) string {
	out := make([]string, len(k.Keys))
	for i, c := range k.Keys {
		out[i] = alias + pgx.Identifier{c.Name}.Sanitize()
	}
	return strings.Join(out, ", ")
}

// join matches target rows t with keys k, column by column.
func (k Keyed) join() string {
	on := make([]string, len(k.Keys))
	for i, c := range k.Keys {
		q := pgx.Identifier{c.Name}.Sanitize()
		on[i] = "t." + q + " = k." + q
	}
	return strings.Join(on, " AND ")
}

// KeyPage returns up to limit keys of the target's rows after the key
// after (source_key JSON; nil: from the first) up to upTo included (nil: to
// the last), in key order, as values, and whether each row holds a result
// (its result column not NULL). Each page is one short statement: no
// transaction spans pages.
func (k Keyed) KeyPage(ctx context.Context, conn *pgx.Conn, after, upTo []byte, limit int) (keys [][]any, values []bool, err error) {
	var where []string
	args := []any{limit}
	bound := func(op string, key []byte) {
		args = append(args, string(key))
		where = append(where, fmt.Sprintf("(%s) %s (SELECT %s FROM jsonb_populate_record(NULL::%s, $%d::jsonb) AS k)", k.list("t."), op, k.list("k."), k.table(), len(args)))
	}
	if after != nil {
		bound(">", after)
	}
	if upTo != nil {
		bound("<=", upTo)
	}
	cond := ""
	if len(where) > 0 {
		cond = "WHERE " + strings.Join(where, " AND ")
	}
	sql := fmt.Sprintf("SELECT %s, t.%s IS NOT NULL FROM %s AS t %s ORDER BY %s LIMIT $1",
		k.list("t."), pgx.Identifier{k.Target.Column}.Sanitize(), k.table(), cond, k.list("t."))
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read keys of %s: %w", k.Target.Name(), err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, nil, fmt.Errorf("read keys of %s: %w", k.Target.Name(), err)
		}
		v, _ := vals[len(k.Keys)].(bool)
		keys, values = append(keys, vals[:len(k.Keys)]), append(values, v)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read keys of %s: %w", k.Target.Name(), err)
	}
	return keys, values, nil
}

// Held is what the target holds for one key: a row, and in it a result
// (the result column not NULL).
type Held struct {
	Row, Value bool
}

// Holds returns, for each of keys (source_key JSON objects), what the
// target holds for it, in one statement.
func (k Keyed) Holds(ctx context.Context, conn *pgx.Conn, keys []string) ([]Held, error) {
	out := make([]Held, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	sql := fmt.Sprintf(`SELECT j.ord, t.%[3]s IS NOT NULL FROM unnest($1::jsonb[]) WITH ORDINALITY AS j(key, ord)
CROSS JOIN LATERAL jsonb_populate_record(NULL::%[1]s, j.key) AS k
JOIN %[1]s AS t ON %[2]s`, k.table(), k.join(), pgx.Identifier{k.Target.Column}.Sanitize())
	rows, err := conn.Query(ctx, sql, keys)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Target.Name(), err)
	}
	var ord int64
	var value bool
	_, err = pgx.ForEachRow(rows, []any{&ord, &value}, func() error {
		out[ord-1] = Held{Row: true, Value: value}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.Target.Name(), err)
	}
	return out, nil
}

// Lock locks, in tx, the target rows keyed keys (source_key JSON objects)
// that exist, and returns which ones: a lane's write of one of them waits
// until tx ends, so that what the caller checks of the source after Lock
// holds until its delete commits.
func (k Keyed) Lock(ctx context.Context, tx pgx.Tx, keys []string) ([]bool, error) {
	out := make([]bool, len(keys))
	sql := fmt.Sprintf(`SELECT j.ord FROM unnest($1::jsonb[]) WITH ORDINALITY AS j(key, ord)
CROSS JOIN LATERAL jsonb_populate_record(NULL::%[1]s, j.key) AS k
JOIN %[1]s AS t ON %[2]s FOR UPDATE OF t`, k.table(), k.join())
	rows, err := tx.Query(ctx, sql, keys)
	if err != nil {
		return nil, fmt.Errorf("lock rows of %s: %w", k.Target.Name(), err)
	}
	var ord int64
	_, err = pgx.ForEachRow(rows, []any{&ord}, func() error {
		out[ord-1] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock rows of %s: %w", k.Target.Name(), err)
	}
	return out, nil
}

// DeleteKeys deletes, in tx, the target rows keyed keys (source_key JSON
// objects) and returns how many it deleted.
func (k Keyed) DeleteKeys(ctx context.Context, tx pgx.Tx, keys []string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	sql := fmt.Sprintf(`DELETE FROM %[1]s AS t USING (SELECT (jsonb_populate_record(NULL::%[1]s, j.key)).* FROM unnest($1::jsonb[]) AS j(key)) AS k
WHERE %[2]s`, k.table(), k.join())
	tag, err := tx.Exec(ctx, sql, keys)
	if err != nil {
		return 0, fmt.Errorf("delete rows of %s: %w", k.Target.Name(), err)
	}
	return tag.RowsAffected(), nil
}
