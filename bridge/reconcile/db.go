package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// Rule is what a reconciliation knows of a rule.
type Rule struct {
	Name, Fingerprint string
	Source            *catalog.Table
	// Keys are the rule's key columns, as the rule derives them
	// (rules.Rule.KeyColumns): the target is keyed by the same columns.
	Keys        []sink.KeyColumn
	ImageColumn string
	Target      *sink.Target
	// Rules are the rules that write Target (Name among them): a deleted
	// target row's errors and stored inputs are theirs.
	Rules []string
}

// Of returns what a reconciliation of r needs; set holds the rules that
// write r's target with it.
func Of(r *rules.Rule, set []*rules.Rule) Rule {
	names := []string{r.Name}
	for _, o := range set {
		if o.Name != r.Name && o.Target.Name() == r.Target.Name() {
			names = append(names, o.Name)
		}
	}
	return Rule{Name: r.Name, Fingerprint: r.Fingerprint, Source: r.Source, Keys: r.KeyColumns, ImageColumn: r.ImageColumn, Target: r.Target, Rules: names}
}

// DB is Deps on a source and a target connection, which may reach
// different databases or servers: no statement joins them. src and tgt may
// be the same connection. It is used by one goroutine.
//
// Remove is the one write that races with a running bridge's lanes; it
// locks the target rows first (SELECT … FOR UPDATE, in a target
// transaction), then asks the source which of them are still absent (a
// statement that starts after the locks are held, so it sees every source
// commit before that), deletes those, and commits. A source row inserted
// after that check is streamed later; its result's write waits for the
// lock and, once the delete committed, inserts the row anew. So a row
// inserted after a page was read never loses its result, whether the
// target is the source's database or another.
type DB struct {
	src, tgt *pgx.Conn
	r        Rule
	scopes   []pgx.Identifier // partitions whose keys SourceKeys reads; none: the source table
	keyed    sink.Keyed
}

// NewDB returns the Deps of a reconciliation of r on src and tgt; scopes
// are the relations (partitions of r's source) that Options.Scopes counts.
func NewDB(src, tgt *pgx.Conn, r Rule, scopes []pgx.Identifier) *DB {
	return &DB{src: src, tgt: tgt, r: r, scopes: scopes, keyed: sink.Keyed{Target: r.Target, Keys: r.Keys}}
}

func (d *DB) list(alias string) string { return d.listWith(alias, "") }

// listWith is the key columns, each quoted, prefixed with alias and
// followed by suffix: built column by column, since a quoted name may
// itself hold ", ".
func (d *DB) listWith(alias, suffix string) string {
	out := make([]string, len(d.r.Keys))
	for i, c := range d.r.Keys {
		out[i] = alias + pgx.Identifier{c.Name}.Sanitize() + suffix
	}
	return strings.Join(out, ", ")
}

func (d *DB) root() string { return d.r.Source.Identifier().Sanitize() }

// fromJSON is the key given as source_key JSON in parameter n, as a row of
// the key's own types.
func (d *DB) fromJSON(n int) string {
	return fmt.Sprintf("(SELECT %s FROM jsonb_populate_record(NULL::%s, $%d::jsonb) AS k)", d.list("k."), d.root(), n)
}

func (d *DB) keyJSON(conn *pgx.Conn, vals []any) ([]byte, error) {
	return sink.KeyJSON(conn.TypeMap(), d.r.Keys, vals)
}

func (d *DB) SourceKeys(ctx context.Context, scope int, after []byte, limit int) ([]Key, error) {
	rel := d.root()
	if scope >= 0 {
		rel = d.scopes[scope].Sanitize()
	}
	where := ""
	args := []any{limit}
	if after != nil {
		where = fmt.Sprintf("WHERE (%s) > %s", d.list("s."), d.fromJSON(2))
		args = append(args, string(after))
	}
	sql := fmt.Sprintf("SELECT %s, s.%s IS NULL FROM %s AS s %s ORDER BY %s LIMIT $1",
		d.list("s."), pgx.Identifier{d.r.ImageColumn}.Sanitize(), rel, where, d.list("s."))
	rows, err := d.src.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", rel, err)
	}
	defer rows.Close()
	var out []Key
	n := len(d.r.Keys)
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("read keys of %s: %w", rel, err)
		}
		js, err := d.keyJSON(d.src, vals[:n])
		if err != nil {
			return nil, err
		}
		null, _ := vals[n].(bool)
		out = append(out, Key{JSON: js, ImageNull: null})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", rel, err)
	}
	return out, nil
}

func (d *DB) TargetKeys(ctx context.Context, after, upTo []byte, limit int) ([]Key, error) {
	page, values, err := d.keyed.KeyPage(ctx, d.tgt, after, upTo, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Key, len(page))
	for i, vals := range page {
		if out[i].JSON, err = d.keyJSON(d.tgt, vals); err != nil {
			return nil, err
		}
		out[i].Value = values[i]
	}
	return out, nil
}

func (d *DB) OpenErrors(ctx context.Context, keys [][]byte) ([]bool, error) {
	open, err := state.OpenErrorKeys(ctx, d.tgt, d.r.Name, texts(keys))
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = open[string(k)]
	}
	return out, nil
}

func texts(keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

// InSource reports, for each key, whether the source holds it now.
func (d *DB) InSource(ctx context.Context, keys [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	on := make([]string, len(d.r.Keys))
	for i, c := range d.r.Keys {
		q := pgx.Identifier{c.Name}.Sanitize()
		on[i] = "s." + q + " = k." + q
	}
	sql := fmt.Sprintf(`SELECT j.ord FROM unnest($1::jsonb[]) WITH ORDINALITY AS j(key, ord)
CROSS JOIN LATERAL jsonb_populate_record(NULL::%[1]s, j.key) AS k
WHERE EXISTS (SELECT FROM %[1]s AS s WHERE %[2]s)`, d.root(), strings.Join(on, " AND "))
	rows, _ := d.src.Query(ctx, sql, texts(keys))
	var ord int64
	_, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
		out[ord-1] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up keys in %s: %w", d.r.Source, err)
	}
	return out, nil
}

func (d *DB) Lacking(ctx context.Context, keys []Key) ([]bool, error) {
	js := make([]string, len(keys))
	for i, k := range keys {
		js[i] = string(k.JSON)
	}
	held, err := d.keyed.Holds(ctx, d.tgt, js)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	var nulls []string // a NULL result of an image: lacking unless an errors row says why
	for i, h := range held {
		switch {
		case !h.Row:
			out[i] = true
		case !h.Value && !keys[i].ImageNull:
			nulls = append(nulls, js[i])
		}
	}
	if len(nulls) == 0 {
		return out, nil
	}
	open, err := state.OpenErrorKeys(ctx, d.tgt, d.r.Name, nulls)
	if err != nil {
		return nil, err
	}
	for i, h := range held {
		if h.Row && !h.Value && !keys[i].ImageNull && !open[js[i]] {
			out[i] = true
		}
	}
	return out, nil
}

func (d *DB) Remove(ctx context.Context, keys [][]byte) (int64, error) {
	if d.r.Target.WriteBack {
		return 0, nil // the target is the source: its rows are the source's own
	}
	var n int64
	err := pgx.BeginFunc(ctx, d.tgt, func(tx pgx.Tx) error {
		locked, err := d.keyed.Lock(ctx, tx, texts(keys))
		if err != nil {
			return err
		}
		var held [][]byte
		for i, k := range keys {
			if locked[i] {
				held = append(held, k)
			}
		}
		// Checked after the locks are held: see DB.
		in, err := d.InSource(ctx, held)
		if err != nil {
			return err
		}
		var gone []string
		for i, k := range held {
			if !in[i] {
				gone = append(gone, string(k))
			}
		}
		if n, err = d.keyed.DeleteKeys(ctx, tx, gone); err != nil {
			return err
		}
		return state.ForgetKeys(ctx, tx, d.r.Rules, gone)
	})
	if err != nil {
		return 0, fmt.Errorf("remove results of rows gone from %s: %w", d.r.Source, err)
	}
	return n, nil
}

func (d *DB) Less(ctx context.Context, a, b []byte) (bool, error) {
	var less bool
	sql := fmt.Sprintf("SELECT %s < %s", d.fromJSON(1), d.fromJSON(2))
	if err := d.src.QueryRow(ctx, sql, string(a), string(b)).Scan(&less); err != nil {
		return false, fmt.Errorf("compare keys of %s: %w", d.r.Source, err)
	}
	return less, nil
}

// before returns the key of the source row right before key (nil: none),
// the exclusive lower bound of a backfill that starts at key.
func (d *DB) before(ctx context.Context, key []byte) ([]byte, error) {
	sql := fmt.Sprintf("SELECT %s FROM %s AS s WHERE (%s) < %s ORDER BY %s LIMIT 1",
		d.list("s."), d.root(), d.list("s."), d.fromJSON(1), d.listWith("s.", " DESC"))
	rows, err := d.src.Query(ctx, sql, string(key))
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", d.r.Source, err)
	}
	vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", d.r.Source, err)
	}
	if len(vals) == 0 {
		return nil, nil
	}
	return d.keyJSON(d.src, vals[0])
}

// queueTries bounds how often Queue reads the backfill row again when
// another reconciliation changed it meanwhile.
const queueTries = 5

func (d *DB) Queue(ctx context.Context, first, last []byte) (string, error) {
	from, err := d.before(ctx, first)
	if err != nil {
		return "", err
	}
	for range queueTries {
		prev, found, err := state.LoadBackfill(ctx, d.tgt, d.r.Name)
		if err != nil {
			return "", err
		}
		if !found {
			return "not queued: the rule has not backfilled yet, and its first backfill covers every row", nil
		}
		after, stop := from, last
		if prev.State == state.Queued {
			// The union with the range queued before: from the lower of
			// the two starts to the higher of the two stops.
			if after != nil {
				if prev.LastKey == nil {
					after = nil
				} else if less, err := d.Less(ctx, prev.LastKey, after); err != nil {
					return "", err
				} else if less {
					after = prev.LastKey
				}
			}
			if prev.StopKey != nil {
				if less, err := d.Less(ctx, stop, prev.StopKey); err != nil {
					return "", err
				} else if less {
					stop = prev.StopKey
				}
			}
		}
		out, err := state.QueueBackfill(ctx, d.tgt, d.r.Name, d.r.Fingerprint, prev, after, stop)
		if err != nil {
			return "", err
		}
		switch out {
		case state.QueuedNow, state.QueueWidened:
			return "queued as a backfill; the bridge runs it at its next check", nil
		case state.QueueRunning:
			return "not queued: a backfill of the rule is running; reconcile again once it is done", nil
		}
	}
	return "", fmt.Errorf("queue a backfill of %s: its backfill row kept changing", d.r.Name)
}
