package replication

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// TupleReader reads columns of a tuple of a relation by name, decoded with
// M (which belongs to the reading goroutine).
type TupleReader struct {
	M   *pgtype.Map
	Rel *Relation
	T   Tuple
}

// Value returns the named column decoded (nil for NULL).
func (r TupleReader) Value(name string) (any, error) {
	i := r.Rel.ColumnIndex(name)
	if i < 0 || i >= len(r.T) {
		return nil, fmt.Errorf("%s.%s has no column %q", r.Rel.Namespace, r.Rel.Name, name)
	}
	return DecodeValue(r.M, r.Rel.Columns[i], r.T[i])
}

// Text returns the named text column; "" for NULL.
func (r TupleReader) Text(name string) (string, error) {
	p, err := r.TextPtr(name)
	if err != nil || p == nil {
		return "", err
	}
	return *p, nil
}

// TextPtr returns the named text column; nil for NULL.
func (r TupleReader) TextPtr(name string) (*string, error) {
	v, err := r.Value(name)
	if err != nil || v == nil {
		return nil, err
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("column %s: %T is not text", name, v)
	}
	return &s, nil
}
