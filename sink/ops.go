package sink

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Op is one effect of a source change on the target database. Ops queue their
// statements on the batch of the one transaction that Writer.Write runs: the
// ops on target tables are here, those on pgimageai.* tables in package state.
type Op interface {
	Queue(b *pgx.Batch)
}

// Upsert writes a result: the row keyed Key gets Value in the target column,
// inserted or updated, and only when the value differs. A nil Value is SQL
// NULL; otherwise a string (text) or a []float32 (vector).
type Upsert struct {
	Target *Target
	Key    []any
	Value  any
}

func (o Upsert) Queue(b *pgx.Batch) {
	v := o.Value
	if vec, ok := v.([]float32); ok && o.Target.Vector {
		v = VectorText(vec)
	}
	b.Queue(o.Target.upsert, append(append([]any{}, o.Key...), v)...)
}

// Delete removes the target row keyed Key.
type Delete struct {
	Target *Target
	Key    []any
}

func (o Delete) Queue(b *pgx.Batch) { b.Queue(o.Target.del, o.Key...) }

// Move re-keys a target row after the source row's primary key changed. A
// stale row at the new key, which cannot correspond to a source row, goes
// first.
type Move struct {
	Target         *Target
	OldKey, NewKey []any
}

func (o Move) Queue(b *pgx.Batch) {
	b.Queue(o.Target.del, o.NewKey...)
	b.Queue(o.Target.move, append(append([]any{}, o.NewKey...), o.OldKey...)...)
}

// Truncate empties a target table.
type Truncate struct {
	Target *Target
}

func (o Truncate) Queue(b *pgx.Batch) { b.Queue("TRUNCATE " + o.Target.Table.Identifier().Sanitize()) }

// VectorText renders v in pgvector's text form, "[0.1,0.2]".
func VectorText(v []float32) string {
	var sb strings.Builder
	sb.Grow(len(v)*10 + 2)
	sb.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatFloat(float64(x), 'g', -1, 32))
	}
	sb.WriteByte(']')
	return sb.String()
}
