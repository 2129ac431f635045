package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/state"
)

// A widening is a change of a column's type that keeps every value it may
// hold, exactly: ALTER COLUMN ... TYPE to it never fails, never rounds, and
// every key stays equal to itself. ok says whether the type modifiers (a
// length, a precision) of the two allow it; nil is always.
type widening struct {
	from, to uint32
	ok       func(from, to int32) bool
}

// widenings is the whole set of type changes of a source's key that the
// bridge follows in a target it created. Anything else — a narrowing, a
// change of kind (integer to text), char(n), floating point, a time zone
// added — is not followed: the rule is invalid_rule until the types match.
var widenings = []widening{
	{pgtype.Int2OID, pgtype.Int4OID, nil},
	{pgtype.Int2OID, pgtype.Int8OID, nil},
	{pgtype.Int4OID, pgtype.Int8OID, nil},
	{pgtype.Int2OID, pgtype.NumericOID, numericHolds(5)},
	{pgtype.Int4OID, pgtype.NumericOID, numericHolds(10)},
	{pgtype.Int8OID, pgtype.NumericOID, numericHolds(19)},
	{pgtype.NumericOID, pgtype.NumericOID, numericWider},
	{pgtype.VarcharOID, pgtype.VarcharOID, varcharLonger},
	{pgtype.VarcharOID, pgtype.TextOID, nil},
	{pgtype.TextOID, pgtype.VarcharOID, func(_, to int32) bool { return to < 0 }}, // varchar without a length
	{pgtype.TimestampOID, pgtype.TimestampOID, fractionFiner},
	{pgtype.TimestamptzOID, pgtype.TimestamptzOID, fractionFiner},
	{pgtype.TimeOID, pgtype.TimeOID, fractionFiner},
}

// Widens reports whether a column of type from may be altered to type to
// keeping every value exactly (see widenings). The same type is no widening.
func Widens(from, to catalog.Column) bool {
	if from.TypeOID == to.TypeOID && from.TypeMod == to.TypeMod {
		return false
	}
	for _, w := range widenings {
		if w.from == from.TypeOID && w.to == to.TypeOID {
			return w.ok == nil || w.ok(from.TypeMod, to.TypeMod)
		}
	}
	return false
}

// numeric splits a numeric type modifier into precision and scale; ok is
// false for an unconstrained numeric. The scale is 11 bits, signed
// (PostgreSQL 15 allows scales below zero and above the precision):
// https://github.com/postgres/postgres/blob/REL_17_STABLE/src/backend/utils/adt/numeric.c
// (make_numeric_typmod).
func numeric(typmod int32) (precision, scale int32, ok bool) {
	if typmod < 4 { // VARHDRSZ
		return 0, 0, false
	}
	m := typmod - 4
	return (m >> 16) & 0xffff, ((m & 0x7ff) ^ 0x400) - 0x400, true
}

// numericHolds says a numeric to holds every integer of digits digits.
func numericHolds(digits int32) func(_, to int32) bool {
	return func(_, to int32) bool {
		p, s, ok := numeric(to)
		return !ok || s >= 0 && p-s >= digits
	}
}

// numericWider: no fewer digits before the point, none fewer after it.
func numericWider(from, to int32) bool {
	pt, st, ok := numeric(to)
	if !ok {
		return true
	}
	pf, sf, ok := numeric(from)
	return ok && st >= sf && pt-st >= pf-sf
}

// varcharLonger: a longer limit, or none (varchar(n)'s modifier is n+4).
func varcharLonger(from, to int32) bool {
	return to < 0 || from >= 0 && to >= from
}

// fractionFiner: as many fractional digits of a second or more (the default,
// -1, is 6).
func fractionFiner(from, to int32) bool {
	digits := func(m int32) int32 {
		if m < 0 {
			return 6
		}
		return m
	}
	return digits(to) >= digits(from)
}

// Retype is one column of a table to be given another type.
type Retype struct {
	Column string
	Type   string // as format_type() prints it: valid SQL
}

// AlterTypes returns the ALTER TABLE statement that gives table's columns
// their new types, identifiers quoted: the statement the bridge runs on a
// target it created, and the one it asks an owner to run on any other.
func AlterTypes(table pgx.Identifier, cols []Retype) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("ALTER COLUMN %s TYPE %s", pgx.Identifier{c.Column}.Sanitize(), c.Type)
	}
	return fmt.Sprintf("ALTER TABLE %s %s", table.Sanitize(), strings.Join(parts, ", "))
}

// widenKey makes the key columns of target table follow a widening of the
// source's key (key, the source's columns): it runs the ALTER TABLE on a
// table the bridge created (state.CreatedTarget) that no rule reads, and
// returns it; for any other table it returns an error that gives the
// statement to run. A key column whose type differs from the source's in a
// way that is no widening is an error saying so. It returns "" when no key
// column differs (a missing one is checkKey's to report).
//
// Where this runs, and why it cannot race the lane: Ensure runs when rules
// are compiled — at start, and on the engine's goroutine at the WAL position
// of a configuration change or of a source relation whose key types changed
// (the engine reloads the rules there, before the first change of the new
// shape reaches a lane) — on the engine's own target connection. The lane of
// the table writes it on another connection. ALTER TABLE takes an ACCESS
// EXCLUSIVE lock: it waits for the lane's transaction in flight to commit,
// and the lane's next transaction waits for it. Neither waits for the other
// in any other way — the ALTER runs alone in its transaction, and a lane
// never waits for the engine while its transaction is open — so they cannot
// deadlock (and if a TRUNCATE in the lane's transaction ever met the queued
// ALTER, PostgreSQL's deadlock detection fails one of the two with SQLSTATE
// 40P01, transient, and both retry). Statements prepared on the lane's
// session before the ALTER are not used for keys of the new type: a
// target's statements name their key parameters' types (prepareSQL).
func widenKey(ctx context.Context, conn *pgx.Conn, table *catalog.Table, key []catalog.Column) (string, error) {
	var retype []Retype
	var what []string
	for _, k := range key {
		c, ok := table.Column(k.Name)
		if !ok || c.TypeOID == k.TypeOID && c.TypeMod == k.TypeMod {
			continue
		}
		if !Widens(c, k) {
			return "", fmt.Errorf("target table %s: key column %q is %s, the source's is %s; the bridge follows only a widening of the source's key (e.g. integer to bigint, varchar(n) to text or a larger n, numeric to a larger precision), never a narrowing or a change of kind: make the target's type equal to the source's",
				table, k.Name, c.Type, k.Type)
		}
		retype = append(retype, Retype{Column: k.Name, Type: k.Type})
		what = append(what, fmt.Sprintf("key column %q is %s, the source's is %s", k.Name, c.Type, k.Type))
	}
	if len(retype) == 0 {
		return "", nil
	}
	stmt := AlterTypes(table.Identifier(), retype)
	ours, err := state.CreatedTarget(ctx, conn, table.OID)
	if err != nil {
		return "", fmt.Errorf("target table %s: %w", table, err)
	}
	if ours {
		// Never a table a rule reads: a write-back target, or a table made
		// as one rule's target that another rule reads as its source.
		read, err := state.SourceTable(ctx, conn, table.OID)
		if err != nil {
			return "", fmt.Errorf("target table %s: %w", table, err)
		}
		ours = !read
	}
	if !ours {
		return "", fmt.Errorf("target table %s: %s; the bridge widens only the target tables it created, so run: %s",
			table, strings.Join(what, ", "), stmt)
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("target table %s: %s; widening it failed (run %s once what stops it is fixed): %w",
			table, strings.Join(what, ", "), stmt, err)
	}
	return stmt, nil
}
