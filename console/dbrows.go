package console

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// The reads of the rules' own tables: the target rows a rule's page shows
// and the source images its thumbnails are made of. Identifiers are quoted
// with pgx.Identifier; keys travel as source_key JSON, turned back into the
// key's own types by jsonb_populate_record, as the bridge's reads do.

// ruleInfo is what the reads need of a rule, looked up at most every
// infoLife.
type ruleInfo struct {
	rule      state.RuleListing
	maxImage  int64          // the model's max_image_bytes, capped at MaxImageBytes
	source    *catalog.Table // nil when it does not resolve
	target    *catalog.Table // nil when it does not resolve
	vecSchema string         // the schema of pgvector's type when the target column is vector(n)
}

const infoLife = 10 * time.Second

// info returns the rule named name; ErrNoRule when there is none.
func (d *DB) info(ctx context.Context, name string) (*ruleInfo, error) {
	d.mu.Lock()
	if time.Since(d.infoAt) > infoLife {
		d.infos, d.infoAt = nil, time.Now()
	}
	if i, ok := d.infos[name]; ok {
		d.mu.Unlock()
		return i, nil
	}
	d.mu.Unlock()
	i := &ruleInfo{maxImage: MaxImageBytes}
	found := false
	err := d.onSrc(ctx, func(c *pgx.Conn) error {
		listings, err := state.AllRules(ctx, c)
		if err != nil {
			return err
		}
		for _, l := range listings {
			if l.Name == name {
				i.rule, found = l, true
			}
		}
		if !found {
			return nil
		}
		models, err := state.Models(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range models {
			if m.Name != i.rule.Model {
				continue
			}
			if opts, err := provider.ParseOptions(m.Options); err == nil && opts.MaxImageBytes > 0 {
				i.maxImage = min(i.maxImage, opts.MaxImageBytes)
			}
		}
		if i.source, err = lookupTable(ctx, c, i.rule.SourceTable); errors.Is(err, catalog.ErrNoTable) {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNoRule
	}
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		var err error
		if i.target, err = lookupTable(ctx, c, i.rule.TargetTable); errors.Is(err, catalog.ErrNoTable) {
			return nil
		} else if err != nil {
			return err
		}
		col, ok := i.target.Column(i.rule.TargetColumn)
		if !ok {
			return nil
		}
		// pgvector's type, in whatever schema the extension went: format_type
		// qualifies it (search_path is pg_catalog), so it is found by OID.
		err = c.QueryRow(ctx, `SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_extension e ON e.extnamespace = n.oid AND e.extname = 'vector' WHERE t.oid = $1 AND t.typname = 'vector'`, col.TypeOID).Scan(&i.vecSchema)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.infos == nil {
		d.infos = map[string]*ruleInfo{}
	}
	d.infos[name] = i
	d.mu.Unlock()
	return i, nil
}

// lookupTable resolves a rule's table name. With search_path pinned to
// pg_catalog, a bare name is tried in public too, where the rules' bare
// names live (SPEC: 'table' means search_path public).
func lookupTable(ctx context.Context, c *pgx.Conn, name string) (*catalog.Table, error) {
	t, err := catalog.Lookup(ctx, c, name)
	if errors.Is(err, catalog.ErrNoTable) && !strings.Contains(name, ".") {
		return catalog.Lookup(ctx, c, "public."+name)
	}
	return t, err
}

// keyColumns returns t's key columns quoted with alias, and the JSON of a
// key as jsonb_build_object builds it from them: names as parameters from
// $first on.
func keyColumns(t *catalog.Table, alias string, first int) (cols, jsonKey string, names []any) {
	var c, j []string
	for n, k := range t.PrimaryKey {
		q := alias + "." + pgx.Identifier{k}.Sanitize()
		c = append(c, q)
		j = append(j, fmt.Sprintf("$%d::text, %s", first+n, q))
		names = append(names, k)
	}
	return strings.Join(c, ", "), "jsonb_build_object(" + strings.Join(j, ", ") + ")::text", names
}

// keyOf is the row of t's key columns of the source_key JSON parameter $n.
func keyOf(t *catalog.Table, n int) string {
	cols, _, _ := keyColumns(t, "k", 0)
	return fmt.Sprintf("(SELECT %s FROM jsonb_populate_record(NULL::%s, $%d::jsonb) AS k)", cols, t.Identifier().Sanitize(), n)
}

// Results reads a page of rule's target rows, greatest key first.
func (d *DB) Results(ctx context.Context, rule string, q ResultQuery) (ResultPage, error) {
	i, err := d.info(ctx, rule)
	if err != nil {
		return ResultPage{}, err
	}
	p := ResultPage{Rule: i.rule, Embed: i.rule.Function == string(functions.Embed), Vector: i.vecSchema != ""}
	t := i.target
	if t == nil || len(t.PrimaryKey) == 0 {
		return p, nil // no target table yet: nothing to show
	}
	if _, ok := t.Column(i.rule.TargetColumn); !ok {
		return p, nil
	}
	cols, jsonKey, names := keyColumns(t, "t", 1)
	col := "t." + pgx.Identifier{i.rule.TargetColumn}.Sanitize()
	value := fmt.Sprintf("left(%s::text, 2000), NULL::int, NULL::float8", col)
	if p.Embed {
		value = fmt.Sprintf("NULL::text, cardinality(%[1]s::real[]), (SELECT sqrt(sum(x::float8 * x::float8)) FROM unnest(%[1]s::real[]) AS x)", col)
	}
	args := names
	where := "true"
	switch {
	case q.Key != "":
		key := q.Key
		if !strings.HasPrefix(strings.TrimSpace(key), "{") && len(t.PrimaryKey) == 1 {
			where = fmt.Sprintf("%s::text = $%d", cols, len(args)+1)
		} else {
			where = fmt.Sprintf("(%s) = %s", cols, keyOf(t, len(args)+1))
		}
		args = append(args, key)
	case q.Before != "":
		where = fmt.Sprintf("(%s) < %s", cols, keyOf(t, len(args)+1))
		args = append(args, q.Before)
	}
	limit := max(1, q.Limit)
	desc := strings.ReplaceAll(cols, ", ", " DESC, ") + " DESC"
	sql := fmt.Sprintf("SELECT %s, %s FROM %s AS t WHERE %s ORDER BY %s LIMIT %d",
		jsonKey, value, t.Identifier().Sanitize(), where, desc, limit+1)
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		rows, _ := c.Query(ctx, sql, args...)
		var err error
		p.Results, err = pgx.CollectRows(rows, scanResult)
		return err
	})
	switch {
	case dataException(err):
		return p, nil // a search for a key that is no key: nothing found
	case pgerr.SQLState(err) == pgerr.InsufficientPrivilege:
		p.Denied = true
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if len(p.Results) > limit {
		p.Results = p.Results[:limit]
		p.Next = p.Results[limit-1].Key
	}
	return p, nil
}

func scanResult(row pgx.CollectableRow) (Result, error) {
	var r Result
	var dim *int32
	var norm *float64
	err := row.Scan(&r.Key, &r.Caption, &dim, &norm)
	if dim != nil {
		r.Dim = int(*dim)
	}
	if norm != nil {
		r.Norm = *norm
	}
	return r, err
}

// Similar returns the n rows nearest to the row keyed key by cosine distance
// of rule's pgvector column, nearest first.
func (d *DB) Similar(ctx context.Context, rule, key string, n int) ([]Result, error) {
	i, err := d.info(ctx, rule)
	if err != nil {
		return nil, err
	}
	if i.vecSchema == "" || i.target == nil || len(i.target.PrimaryKey) == 0 {
		return nil, ErrNoSimilar
	}
	t := i.target
	cols, jsonKey, names := keyColumns(t, "t", 1)
	col := pgx.Identifier{i.rule.TargetColumn}.Sanitize()
	op := "OPERATOR(" + pgx.Identifier{i.vecSchema}.Sanitize() + ".<=>)"
	at := len(names) + 1
	sql := fmt.Sprintf(`SELECT %[1]s, NULL::text, cardinality(t.%[2]s::real[]), (SELECT sqrt(sum(x::float8 * x::float8)) FROM unnest(t.%[2]s::real[]) AS x),
  (t.%[2]s %[3]s q.v)::float8
FROM %[4]s AS t, (SELECT s.%[2]s AS v FROM %[4]s AS s WHERE (%[5]s) = %[6]s) AS q
WHERE t.%[2]s IS NOT NULL AND (%[7]s) <> %[6]s
ORDER BY t.%[2]s %[3]s q.v LIMIT %[8]d`,
		jsonKey, col, op, t.Identifier().Sanitize(), strings.ReplaceAll(cols, "t.", "s."), keyOf(t, at), cols, n)
	var out []Result
	err = d.onTgt(ctx, func(c *pgx.Conn) error {
		rows, _ := c.Query(ctx, sql, append(names, key)...)
		var err error
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Result, error) {
			var r Result
			var dim *int32
			var norm *float64
			err := row.Scan(&r.Key, &r.Caption, &dim, &norm, &r.Distance)
			if dim != nil {
				r.Dim = int(*dim)
			}
			if norm != nil {
				r.Norm = *norm
			}
			return r, err
		})
		return err
	})
	return out, err
}

// Image reads the image of rule's source row keyed key: first its length and
// SHA-256, computed by the server, then — only when have does not know the
// hash — its bytes, when within the model's max_image_bytes and
// MaxImageBytes. A row that is gone, a NULL or empty image, an image column
// the console cannot read (not bytea, or no privilege: a row the console may
// not read) all give ErrNoImage.
func (d *DB) Image(ctx context.Context, rule, key string, have func([32]byte) bool) (ImageRead, error) {
	var out ImageRead
	i, err := d.info(ctx, rule)
	if err != nil {
		return out, err
	}
	t := i.source
	if t == nil || len(t.PrimaryKey) == 0 {
		return out, ErrNoImage
	}
	col, ok := t.Column(i.rule.ImageColumn)
	if !ok || col.TypeOID != rules.ByteaOID {
		return out, ErrNoImage
	}
	cols, _, _ := keyColumns(t, "s", 0)
	img := "s." + pgx.Identifier{i.rule.ImageColumn}.Sanitize()
	from := fmt.Sprintf("FROM %s AS s WHERE (%s) = %s", t.Identifier().Sanitize(), cols, keyOf(t, 1))
	err = d.onSrc(ctx, func(c *pgx.Conn) error {
		var size *int32
		var sum []byte
		if err := c.QueryRow(ctx, fmt.Sprintf("SELECT octet_length(%[1]s), sha256(%[1]s) %[2]s", img, from), key).Scan(&size, &sum); err != nil {
			return err
		}
		if size == nil || *size == 0 || int64(*size) > i.maxImage || len(sum) != sha256.Size {
			return ErrNoImage
		}
		out.Size = int64(*size)
		copy(out.Sum[:], sum)
		if have(out.Sum) {
			return nil
		}
		if err := c.QueryRow(ctx, fmt.Sprintf("SELECT %s %s AND octet_length(%s) <= $2", img, from, img), key, i.maxImage).Scan(&out.Bytes); err != nil {
			return err
		}
		if sha256.Sum256(out.Bytes) != out.Sum { // changed between the two reads
			out.Sum = sha256.Sum256(out.Bytes)
		}
		return nil
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, ErrNoImage), pgerr.SQLState(err) == pgerr.InsufficientPrivilege, dataException(err):
		return out, ErrNoImage
	case err != nil:
		return out, err
	}
	if out.Bytes == nil && !have(out.Sum) {
		out.Bytes = []byte{}
	}
	return out, nil
}

// dataException: a key that does not fit the key's types (class 22, e.g.
// 22P02 invalid_text_representation), or of the wrong shape (42804): a key
// that no row can have.
func dataException(err error) bool {
	code := pgerr.SQLState(err)
	return strings.HasPrefix(code, "22") || code == pgerr.DatatypeMismatch
}
