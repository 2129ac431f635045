package engine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/replication"
)

// templateValues returns the named columns of a tuple as text, and the names
// that arrived as unchanged TOAST (their values are not in the tuple). A
// value is cut after limit+1 bytes: the prompt it renders is then over
// max_prompt_bytes (a too_large row, functions.CheckPrompt) whatever the
// rest, and holds no more than that per column.
func (b *base) templateValues(rel *replication.Relation, t replication.Tuple, tpl *rules.Template, limit int64) (map[string]string, []string, error) {
	vals := map[string]string{}
	var unchanged []string
	for _, name := range tpl.Columns() {
		i := rel.ColumnIndex(name)
		if i < 0 {
			return nil, nil, fmt.Errorf("table %s.%s no longer has column %q named by a prompt", rel.Namespace, rel.Name, name)
		}
		if t[i].Kind == replication.Unchanged {
			unchanged = append(unchanged, name)
			continue
		}
		v, err := replication.DecodeValue(b.typeMap, rel.Columns[i], t[i])
		if err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", name, err)
		}
		if vals[name], err = rules.TextOf(b.typeMap, rel.Columns[i].TypeOID, v); err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", name, err)
		}
		if int64(len(vals[name])) > limit {
			vals[name] = strings.Clone(vals[name][:limit+1])
		}
	}
	return vals, unchanged, nil
}

// fetched is what fetch read of a source row: the columns asked for, the
// image column's bytes only when they are within the model's
// max_image_bytes.
type fetched struct {
	values map[string]any
	// over is true when the image column, asked for, holds more than
	// max_image_bytes: its bytes were not read, only size and head.
	over bool
	size int
	head []byte
}

// fetch reads columns of r's source row keyed keyJSON from the source: the
// values a change did not carry (unchanged TOAST). It returns nil when the
// row no longer exists. An image over the model's max_image_bytes is not
// read (fetched.over): the statement returns its length and first bytes
// only, as a backfill page does.
func (b *base) fetch(ctx context.Context, r *rules.Rule, keyJSON []byte, columns []string) (*fetched, error) {
	var out *fetched
	err := b.conns.Retrying(ctx, b.log, "reading unchanged TOAST values", func(src, _ *pgx.Conn) error {
		var err error
		out, err = b.fetchOnce(ctx, src, r, keyJSON, columns)
		return err
	})
	return out, err
}

func (b *base) fetchOnce(ctx context.Context, src *pgx.Conn, r *rules.Rule, keyJSON []byte, columns []string) (*fetched, error) {
	var sk, kk, sel []string
	for _, k := range r.KeyColumns {
		name := pgx.Identifier{k.Name}.Sanitize()
		sk, kk = append(sk, "s."+name), append(kk, "k."+name)
	}
	for _, c := range columns {
		col := "s." + pgx.Identifier{c}.Sanitize()
		switch {
		case c == r.ImageColumn:
			// The bytes only within the bound; the length and head always
			// (the head is 16 bytes: cheap next to the value).
			col = fmt.Sprintf("CASE WHEN pg_catalog.octet_length(%[1]s) <= %[2]d THEN %[1]s END, pg_catalog.octet_length(%[1]s), pg_catalog.substring(%[1]s, 1, 16)",
				col, r.Fn.MaxImageBytes())
		default: // a template's column: cut as templateValues cuts
			sc, _ := r.Source.Column(c)
			col = rules.PromptValueSQL(col, sc.TypeOID, r.Fn.MaxPromptBytes())
		}
		sel = append(sel, col)
	}
	table := r.Source.Identifier().Sanitize()
	sql := fmt.Sprintf(`SELECT %s FROM %s AS s WHERE (%s) = (SELECT %s FROM pg_catalog.jsonb_populate_record(NULL::%s, $1::jsonb) AS k)`,
		strings.Join(sel, ", "), table, strings.Join(sk, ", "), strings.Join(kk, ", "), table)
	rows, err := src.Query(ctx, sql, string(keyJSON))
	if err != nil {
		return nil, fmt.Errorf("read %s of %s %s: %w", strings.Join(columns, ", "), r.Source, keyJSON, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals, err := rows.Values()
	if err != nil {
		return nil, err
	}
	out := &fetched{values: map[string]any{}}
	i := 0
	for _, c := range columns {
		out.values[c] = vals[i]
		if c == r.ImageColumn {
			if n, ok := vals[i+1].(int32); ok && int64(n) > r.Fn.MaxImageBytes() {
				out.over, out.size = true, int(n)
				out.head, _ = vals[i+2].([]byte)
			}
			i += 2
		}
		i++
	}
	return out, nil
}

// fetchRow reads what decide asked for (columns) of r's source row: the
// template's unchanged columns (as text) and the image. gone reports a row
// deleted since (its DELETE follows).
func (b *base) fetchRow(ctx context.Context, r *rules.Rule, row work.Row, unchanged, columns []string) (*fetchedRow, bool, error) {
	f, err := b.fetch(ctx, r, row.JSON, columns)
	if err != nil || f == nil {
		return nil, f == nil && err == nil, err
	}
	out := &fetchedRow{values: map[string]string{}}
	for _, name := range unchanged {
		col, _ := r.Source.Column(name)
		if out.values[name], err = rules.TextOf(b.typeMap, col.TypeOID, f.values[name]); err != nil {
			return nil, false, err
		}
	}
	switch img, ok := f.values[r.ImageColumn].([]byte); {
	case f.over:
		out.over = &oversized{size: f.size, head: f.head}
	case ok:
		out.image = img
	default:
		out.imageNull = true
	}
	return out, false, nil
}

// promptMemo remembers the last prompt digest per rule and row, so that an
// UPDATE which leaves the image and the rendered prompt as they were costs no
// call. It is bounded: when full it starts over, which only costs calls that
// the result cache then usually absorbs.
type promptMemo struct {
	m map[[sha256.Size]byte][sha256.Size]byte
}

const promptMemoMax = 100_000

func memoKey(rule string, keyJSON []byte) [sha256.Size]byte {
	return sha256.Sum256(append([]byte(rule+"\x00"), keyJSON...))
}

// last returns the digest of the row's last prompt for rule, or nil when
// none is remembered.
func (p *promptMemo) last(rule string, keyJSON []byte) *[sha256.Size]byte {
	d, ok := p.m[memoKey(rule, keyJSON)]
	if !ok {
		return nil
	}
	return &d
}

func (p *promptMemo) set(rule string, keyJSON []byte, prompt string) {
	if p.m == nil || len(p.m) >= promptMemoMax {
		p.m = map[[sha256.Size]byte][sha256.Size]byte{}
	}
	p.m[memoKey(rule, keyJSON)] = sha256.Sum256([]byte(prompt))
}
