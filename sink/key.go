package sink

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"
)

// KeyColumn names one primary key column and its type.
type KeyColumn struct {
	Name    string
	TypeOID uint32
}

// KeyJSON renders a primary key as the errors table's source_key, e.g.
// {"id": 42} or {"shop": "a", "sku": "X-1"}. Numbers and booleans stay JSON
// numbers and booleans; every other type is its PostgreSQL text form as a
// JSON string (a uuid as "a0ee…", a timestamp as "2026-01-02 03:04:05+00").
// Object keys follow the primary key's order.
func KeyJSON(m *pgtype.Map, cols []KeyColumn, vals []any) ([]byte, error) {
	if len(cols) != len(vals) {
		return nil, fmt.Errorf("key has %d columns but %d values", len(cols), len(vals))
	}
	out := []byte{'{'}
	for i, c := range cols {
		if i > 0 {
			out = append(out, ", "...)
		}
		name, _ := json.Marshal(c.Name)
		out = append(out, name...)
		out = append(out, ": "...)
		v, err := keyValueJSON(m, c.TypeOID, vals[i])
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

func keyValueJSON(m *pgtype.Map, oid uint32, v any) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	text, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
	if err != nil {
		return nil, err
	}
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		return text, nil
	case pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID:
		if f, err := strconv.ParseFloat(string(text), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return text, nil
		}
	case pgtype.BoolOID:
		if string(text) == "t" {
			return []byte("true"), nil
		}
		return []byte("false"), nil
	}
	return json.Marshal(string(text))
}
