package replication

import (
	"bytes"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestValueBytea(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0xFF, '\\', 'x'}
	tests := []struct {
		name    string
		v       Value
		want    []byte
		wantErr error // nil: any error when wantAnyErr
		anyErr  bool
	}{
		{name: "binary", v: Value{Binary, png}, want: png},
		{name: "binary empty", v: Value{Binary, []byte{}}, want: []byte{}},
		{name: "binary nil data is empty", v: Value{Kind: Binary}, want: []byte{}},
		{name: "text hex", v: Value{Text, []byte(`\x89504e470d0a1a0a00ff5c78`)}, want: png},
		{name: "text hex upper case", v: Value{Text, []byte(`\x89504E47`)}, want: png[:4]},
		{name: "text empty", v: Value{Text, []byte(`\x`)}, want: []byte{}},
		{name: "text escape form", v: Value{Text, []byte(`\211PNG`)}, anyErr: true},
		{name: "text odd hex", v: Value{Text, []byte(`\x123`)}, anyErr: true},
		{name: "text bad hex", v: Value{Text, []byte(`\xzz`)}, anyErr: true},
		{name: "null", v: Value{Kind: Null}, wantErr: ErrNull},
		{name: "unchanged", v: Value{Kind: Unchanged}, wantErr: ErrUnchanged},
		{name: "zero kind", v: Value{}, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.v.Bytea()
			switch {
			case tt.wantErr != nil || tt.anyErr:
				if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got == nil || !bytes.Equal(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestDecodeValue(t *testing.T) {
	m := pgtype.NewMap()
	tests := []struct {
		name    string
		col     Column
		v       Value
		want    any
		wantErr bool
	}{
		{name: "int4 binary", col: Column{Name: "id", TypeOID: pgtype.Int4OID}, v: Value{Binary, int4(42)}, want: int32(42)},
		{name: "int4 text", col: Column{Name: "id", TypeOID: pgtype.Int4OID}, v: Value{Text, []byte("42")}, want: int32(42)},
		{name: "int8 binary", col: Column{Name: "id", TypeOID: pgtype.Int8OID}, v: Value{Binary, []byte{0, 0, 0, 0, 0, 0, 1, 0}}, want: int64(256)},
		{name: "text binary", col: Column{Name: "s", TypeOID: pgtype.TextOID}, v: Value{Binary, []byte("héllo")}, want: "héllo"},
		{name: "empty text is not NULL", col: Column{Name: "s", TypeOID: pgtype.TextOID}, v: Value{Kind: Binary}, want: ""},
		{name: "bytea binary", col: Column{Name: "b", TypeOID: pgtype.ByteaOID}, v: Value{Binary, []byte{1, 2}}, want: []byte{1, 2}},
		{name: "bool binary", col: Column{Name: "b", TypeOID: pgtype.BoolOID}, v: Value{Binary, []byte{1}}, want: true},
		{name: "unknown type text", col: Column{Name: "e", TypeOID: 999999}, v: Value{Text, []byte("happy")}, want: "happy"},
		{name: "unknown type binary", col: Column{Name: "e", TypeOID: 999999}, v: Value{Binary, []byte{1}}, wantErr: true},
		{name: "null", col: Column{Name: "id", TypeOID: pgtype.Int4OID}, v: Value{Kind: Null}, want: nil},
		{name: "unchanged", col: Column{Name: "id", TypeOID: pgtype.Int4OID}, v: Value{Kind: Unchanged}, wantErr: true},
		{name: "short int4", col: Column{Name: "id", TypeOID: pgtype.Int4OID}, v: Value{Binary, []byte{1}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeValue(m, tt.col, tt.v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %t", err, tt.wantErr)
			}
			if tt.wantErr {
				if tt.v.Kind == Unchanged && !errors.Is(err, ErrUnchanged) {
					t.Errorf("err = %v, want ErrUnchanged", err)
				}
				return
			}
			if b, ok := tt.want.([]byte); ok {
				if !bytes.Equal(got.([]byte), b) {
					t.Errorf("got %#v, want %#v", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %#v (%T), want %#v", got, got, tt.want)
			}
		})
	}
	if got, err := DecodeValue(nil, Column{TypeOID: pgtype.Int2OID}, Value{Binary, []byte{0, 7}}); err != nil || got != int16(7) {
		t.Errorf("nil map: %v, %v", got, err)
	}
}
