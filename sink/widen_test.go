package sink

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgimageai/pgimageai/catalog"
)

// Type modifiers as PostgreSQL stores them (atttypmod).
func varcharMod(n int32) int32    { return n + 4 }
func numericMod(p, s int32) int32 { return (p<<16 | s&0x7ff) + 4 }

func TestWidens(t *testing.T) {
	col := func(oid uint32, mod int32) catalog.Column { return catalog.Column{TypeOID: oid, TypeMod: mod} }
	var (
		int2, int4, int8 = col(pgtype.Int2OID, -1), col(pgtype.Int4OID, -1), col(pgtype.Int8OID, -1)
		text             = col(pgtype.TextOID, -1)
		varchar          = col(pgtype.VarcharOID, -1)
		numeric          = col(pgtype.NumericOID, -1)
		float4, float8   = col(pgtype.Float4OID, -1), col(pgtype.Float8OID, -1)
		bpchar10         = col(pgtype.BPCharOID, varcharMod(10))
		ts, tstz         = col(pgtype.TimestampOID, -1), col(pgtype.TimestamptzOID, -1)
	)
	vc := func(n int32) catalog.Column { return col(pgtype.VarcharOID, varcharMod(n)) }
	num := func(p, s int32) catalog.Column { return col(pgtype.NumericOID, numericMod(p, s)) }
	tsp := func(p int32) catalog.Column { return col(pgtype.TimestampOID, p) }
	tests := []struct {
		name     string
		from, to catalog.Column
		want     bool
	}{
		{"smallint to integer", int2, int4, true},
		{"smallint to bigint", int2, int8, true},
		{"integer to bigint", int4, int8, true},
		{"bigint to integer", int8, int4, false},
		{"integer to smallint", int4, int2, false},
		{"same type", int4, int4, false},
		{"integer to numeric", int4, numeric, true},
		{"integer to numeric(10,0)", int4, num(10, 0), true},
		{"integer to numeric(9,0)", int4, num(9, 0), false},
		{"integer to numeric(12,2)", int4, num(12, 2), true},
		{"integer to numeric(11,2)", int4, num(11, 2), false},
		{"bigint to numeric(19,0)", int8, num(19, 0), true},
		{"bigint to numeric(18,0)", int8, num(18, 0), false},
		{"smallint to numeric(5,0)", int2, num(5, 0), true},
		{"integer to numeric with negative scale", int4, num(12, -2), false},
		{"numeric to integer", numeric, int4, false},
		{"numeric(10,2) to numeric(12,2)", num(10, 2), num(12, 2), true},
		{"numeric(10,2) to numeric(12,4)", num(10, 2), num(12, 4), true},
		{"numeric(10,2) to numeric(10,4)", num(10, 2), num(10, 4), false},
		{"numeric(10,2) to numeric(12,1)", num(10, 2), num(12, 1), false},
		{"numeric(10,2) to numeric", num(10, 2), numeric, true},
		{"numeric to numeric(30,2)", numeric, num(30, 2), false},
		{"numeric(3,-2) to numeric(5,0)", num(3, -2), num(5, 0), true},
		{"numeric(3,-2) to numeric(4,0)", num(3, -2), num(4, 0), false},
		{"numeric(12,2) to numeric(10,2)", num(12, 2), num(10, 2), false},
		{"varchar(10) to varchar(20)", vc(10), vc(20), true},
		{"varchar(20) to varchar(10)", vc(20), vc(10), false},
		{"varchar(10) to varchar", vc(10), varchar, true},
		{"varchar to varchar(10)", varchar, vc(10), false},
		{"varchar(10) to text", vc(10), text, true},
		{"varchar to text", varchar, text, true},
		{"text to varchar", text, varchar, true},
		{"text to varchar(10)", text, vc(10), false},
		{"char(10) to text", bpchar10, text, false},
		{"char(10) to varchar(10)", bpchar10, vc(10), false},
		{"integer to text", int4, text, false},
		{"text to integer", text, int4, false},
		{"real to double precision", float4, float8, false},
		{"integer to double precision", int4, float8, false},
		{"timestamp(3) to timestamp", tsp(3), ts, true},
		{"timestamp to timestamp(3)", ts, tsp(3), false},
		{"timestamp(3) to timestamp(5)", tsp(3), tsp(5), true},
		{"timestamp to timestamptz", ts, tstz, false},
		{"timestamptz(0) to timestamptz", col(pgtype.TimestamptzOID, 0), tstz, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Widens(tc.from, tc.to); got != tc.want {
				t.Errorf("Widens(%+v, %+v) = %v, want %v", tc.from, tc.to, got, tc.want)
			}
		})
	}
}

func TestAlterTypes(t *testing.T) {
	tests := []struct {
		name  string
		table pgx.Identifier
		cols  []Retype
		want  string
	}{
		{"one column", pgx.Identifier{"public", "d_out"}, []Retype{{"id", "bigint"}},
			`ALTER TABLE "public"."d_out" ALTER COLUMN "id" TYPE bigint`},
		{"quoted names", pgx.Identifier{"Odd Schema", `My "T"`}, []Retype{{"Shop", "text"}, {"sku", "character varying(64)"}},
			`ALTER TABLE "Odd Schema"."My ""T""" ALTER COLUMN "Shop" TYPE text, ALTER COLUMN "sku" TYPE character varying(64)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AlterTypes(tc.table, tc.cols); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
