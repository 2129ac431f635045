package sink

import (
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestKeyJSON(t *testing.T) {
	m := pgtype.NewMap()
	uuid := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	tests := []struct {
		name    string
		cols    []KeyColumn
		vals    []any
		want    string
		wantErr bool
	}{
		{"int", []KeyColumn{{"id", pgtype.Int4OID}}, []any{int32(42)}, `{"id": 42}`, false},
		{"bigint", []KeyColumn{{"id", pgtype.Int8OID}}, []any{int64(-9007199254740993)}, `{"id": -9007199254740993}`, false},
		{"text with quotes", []KeyColumn{{"sku", pgtype.TextOID}}, []any{`a"b\c`}, `{"sku": "a\"b\\c"}`, false},
		{"composite order kept", []KeyColumn{{"shop", pgtype.TextOID}, {"n", pgtype.Int2OID}}, []any{"x", int16(3)}, `{"shop": "x", "n": 3}`, false},
		{"uuid", []KeyColumn{{"id", pgtype.UUIDOID}}, []any{uuid}, `{"id": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}`, false},
		{"bool", []KeyColumn{{"b", pgtype.BoolOID}}, []any{true}, `{"b": true}`, false},
		{"numeric", []KeyColumn{{"n", pgtype.NumericOID}}, []any{pgtype.Numeric{Int: bigInt(12345), Exp: -2, Valid: true}}, `{"n": 123.45}`, false},
		{"timestamptz", []KeyColumn{{"at", pgtype.TimestamptzOID}}, []any{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, `{"at": "2026-01-02 03:04:05Z"}`, false},
		{"odd column name", []KeyColumn{{`My "Key"`, pgtype.Int4OID}}, []any{int32(1)}, `{"My \"Key\"": 1}`, false},
		{"length mismatch", []KeyColumn{{"id", pgtype.Int4OID}}, nil, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KeyJSON(m, tc.cols, tc.vals)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("KeyJSON = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestVectorText(t *testing.T) {
	if got := VectorText([]float32{0.5, -1, 3.25e-7}); got != "[0.5,-1,3.25e-07]" {
		t.Fatalf("VectorText = %s", got)
	}
	if got := VectorText(nil); got != "[]" {
		t.Fatalf("VectorText(nil) = %s", got)
	}
}

func bigInt(n int64) *big.Int { return big.NewInt(n) }
