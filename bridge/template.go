package bridge

import (
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

// placeholder matches {{name}} in a prompt; spaces inside the braces are
// allowed, the name is a column name in exact case.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]+?)\s*\}\}`)

// template is a prompt that names columns of the source row.
type template struct {
	text    string
	columns []string // distinct, in order of first use
}

// parseTemplate returns the template of prompt, or nil when it names no
// column. Every named column must exist in source.
func parseTemplate(prompt string, source *catalog.Table) (*template, error) {
	var cols []string
	seen := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(prompt, -1) {
		name := m[1]
		if _, ok := source.Column(name); !ok {
			return nil, fmt.Errorf("prompt names {{%s}}, but %s has no such column (column names are exact case)", name, source)
		}
		if !seen[name] {
			seen[name] = true
			cols = append(cols, name)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	return &template{text: prompt, columns: cols}, nil
}

// render fills the template with the row's values; NULL renders as "".
func (t *template) render(values map[string]string) string {
	return placeholder.ReplaceAllStringFunc(t.text, func(m string) string {
		return values[strings.TrimSpace(m[2:len(m)-2])]
	})
}

// textOf renders a decoded value as PostgreSQL's text form.
func textOf(m *pgtype.Map, oid uint32, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
	return string(b), err
}

// templateValues returns the named columns of a tuple as text, and the names
// that arrived as unchanged TOAST (their values are not in the tuple).
func (e *engine) templateValues(rel *replication.Relation, t replication.Tuple, tpl *template) (map[string]string, []string, error) {
	vals := map[string]string{}
	var unchanged []string
	for _, name := range tpl.columns {
		i := rel.ColumnIndex(name)
		if i < 0 {
			return nil, nil, fmt.Errorf("table %s.%s no longer has column %q named by a prompt", rel.Namespace, rel.Name, name)
		}
		if t[i].Kind == replication.Unchanged {
			unchanged = append(unchanged, name)
			continue
		}
		v, err := replication.DecodeValue(e.typeMap, rel.Columns[i], t[i])
		if err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", name, err)
		}
		if vals[name], err = textOf(e.typeMap, rel.Columns[i].TypeOID, v); err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", name, err)
		}
	}
	return vals, unchanged, nil
}

// fetch reads columns of r's source row keyed keyJSON from the source: the
// values a change did not carry (unchanged TOAST). It returns nil when the
// row no longer exists.
func (e *engine) fetch(ctx context.Context, r *Rule, keyJSON []byte, columns []string) (map[string]any, error) {
	var out map[string]any
	err := e.live.retrying(ctx, "reading unchanged TOAST values", func() error {
		var err error
		out, err = e.fetchOnce(ctx, r, keyJSON, columns)
		return err
	})
	return out, err
}

func (e *engine) fetchOnce(ctx context.Context, r *Rule, keyJSON []byte, columns []string) (map[string]any, error) {
	var keys, sel []string
	for _, k := range r.KeyColumns {
		keys = append(keys, pgx.Identifier{k.Name}.Sanitize())
	}
	for _, c := range columns {
		sel = append(sel, "s."+pgx.Identifier{c}.Sanitize())
	}
	table := r.Source.Identifier().Sanitize()
	sql := fmt.Sprintf(`SELECT %s FROM %s AS s WHERE (%s) = (SELECT %s FROM jsonb_populate_record(NULL::%s, $1::jsonb) AS k)`,
		strings.Join(sel, ", "), table, prefixed("s.", keys), prefixed("k.", keys), table)
	rows, err := e.live.src.Query(ctx, sql, string(keyJSON))
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
	out := map[string]any{}
	for i, c := range columns {
		out[c] = vals[i]
	}
	return out, nil
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
