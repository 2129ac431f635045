package replication

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// Errors of the Value helpers for values that carry no data.
var (
	// ErrNull: the value is SQL NULL.
	ErrNull = errors.New("value is NULL")
	// ErrUnchanged: the value is an unchanged TOASTed column that pgoutput did
	// not send (Kind Unchanged); the row's current value is not in the change.
	ErrUnchanged = errors.New("value is an unchanged TOASTed column, not sent")
)

// Bytea returns the bytes of a bytea column value. A Binary value is its
// own data (already owned by v, not copied again). A Text value, which
// pgoutput sends for types without a binary send function, is the hex form
// \x...; it is decoded with pgx's bytea codec. The stream sets bytea_output =
// hex on its connection, so the escape form never arrives and is an error.
//
// An empty bytea gives a non-nil empty slice. Null gives ErrNull and
// Unchanged ErrUnchanged: check v.Kind first where those cases matter.
// Bytea is safe for concurrent use.
func (v Value) Bytea() ([]byte, error) {
	switch v.Kind {
	case Binary:
		if v.Data == nil {
			return []byte{}, nil
		}
		return v.Data, nil
	case Text:
		var b []byte
		if err := (pgtype.ByteaCodec{}).PlanScan(nil, pgtype.ByteaOID, pgtype.TextFormatCode, &b).Scan(v.Data, &b); err != nil {
			return nil, fmt.Errorf("decode bytea text: %w", err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case Null:
		return nil, ErrNull
	case Unchanged:
		return nil, ErrUnchanged
	}
	return nil, fmt.Errorf("bytea value of unknown kind %d", v.Kind)
}

// DecodeValue decodes v, a value of column col, with the codec m has for
// col.TypeOID and the format v.Kind names (Binary or Text). Null gives nil
// and no error; Unchanged gives ErrUnchanged. A Text value of a type m does
// not know is returned as its string; a Binary one is an error. Register
// extension types (e.g. pgvector) in m to decode them.
//
// A pgtype.Map is not safe for concurrent use: give each goroutine its own
// (pgtype.NewMap()). A nil m uses a new default Map.
func DecodeValue(m *pgtype.Map, col Column, v Value) (any, error) {
	var format int16
	switch v.Kind {
	case Null:
		return nil, nil
	case Unchanged:
		return nil, fmt.Errorf("column %q: %w", col.Name, ErrUnchanged)
	case Text:
		format = pgtype.TextFormatCode
	case Binary:
		format = pgtype.BinaryFormatCode
	default:
		return nil, fmt.Errorf("column %q: value of unknown kind %d", col.Name, v.Kind)
	}
	if m == nil {
		m = pgtype.NewMap()
	}
	t, ok := m.TypeForOID(col.TypeOID)
	if !ok {
		if format == pgtype.TextFormatCode {
			return string(v.Data), nil
		}
		return nil, fmt.Errorf("column %q: no codec for type OID %d in binary format", col.Name, col.TypeOID)
	}
	data := v.Data
	if data == nil {
		data = []byte{} // nil means NULL to a codec; an empty value is not NULL
	}
	val, err := t.Codec.DecodeValue(m, col.TypeOID, format, data)
	if err != nil {
		return nil, fmt.Errorf("column %q: decode %s: %w", col.Name, t.Name, err)
	}
	return val, nil
}
