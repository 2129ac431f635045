package rules

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
)

// placeholder matches {{name}} in a prompt; spaces inside the braces are
// allowed, the name is a column name in exact case.
var placeholder = regexp.MustCompile(`\{\{\s*([^{}]+?)\s*\}\}`)

// Template is a prompt that names columns of the source row. It is
// immutable.
type Template struct {
	text    string
	columns []string // distinct, in order of first use
}

// ParseTemplate returns the template of prompt, or nil when it names no
// column. Every named column must exist in source.
func ParseTemplate(prompt string, source *catalog.Table) (*Template, error) {
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
	return &Template{text: prompt, columns: cols}, nil
}

// Columns returns the columns the template names, distinct, in order of
// first use. The caller must not change the slice.
func (t *Template) Columns() []string { return t.columns }

// Render fills the template with the row's values; NULL renders as "".
func (t *Template) Render(values map[string]string) string {
	return placeholder.ReplaceAllStringFunc(t.text, func(m string) string {
		return values[strings.TrimSpace(m[2:len(m)-2])]
	})
}

// PromptValueSQL is the SQL of a template's column col, of type typeOID,
// as a prompt takes it when read from the source. A text or varchar value
// is cut after limit+1 characters, which are at least limit+1 bytes: a
// value too long for the model's max_prompt_bytes is still too long (a
// too_large row, functions.CheckPrompt) and is never read whole. A value
// of another type is read as it is (its text form is pgx's, the same as a
// change's), and bounded once rendered.
func PromptValueSQL(col string, typeOID uint32, limit int64) string {
	const textOID, varcharOID = 25, 1043
	if typeOID != textOID && typeOID != varcharOID {
		return col
	}
	return fmt.Sprintf("pg_catalog.left(%s, %d)", col, limit+1)
}

// TextOf renders a decoded value as PostgreSQL's text form.
func TextOf(m *pgtype.Map, oid uint32, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
	return string(b), err
}
