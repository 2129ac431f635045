package rules

import (
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

func TestFitSchemaChanges(t *testing.T) {
	source := &catalog.Table{Schema: "public", Name: "d", PrimaryKey: []string{"id"},
		Columns: []catalog.Column{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "img", TypeOID: ByteaOID, TypeMod: -1}, {Name: "other", TypeOID: ByteaOID, TypeMod: -1}}}
	rules := []*Rule{{Name: "a", Source: source, ImageColumn: "img"}, {Name: "b", Source: source, ImageColumn: "other"}}
	col := func(name string, oid uint32, key bool) replication.Column {
		return replication.Column{Name: name, TypeOID: oid, TypeModifier: -1, Key: key}
	}
	const int4, int8, text = 23, 20, 25
	tests := []struct {
		name    string
		cols    []replication.Column
		ident   byte
		misfits map[string]string // rule → substring of why
		retyped bool
	}{
		{"fits", []replication.Column{col("id", int4, true), col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'd', nil, false},
		{"column added", []replication.Column{col("id", int4, true), col("img", ByteaOID, false), col("other", ByteaOID, false), col("x", text, false)}, 'd', nil, false},
		{"key widened", []replication.Column{col("id", int8, true), col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'd', nil, true},
		{"key modifier changed", []replication.Column{{Name: "id", TypeOID: int4, TypeModifier: 8, Key: true}, col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'd', nil, true},
		{"replica identity full", []replication.Column{col("id", int4, true), col("img", ByteaOID, true), col("other", ByteaOID, true)}, 'f', nil, false},
		{"image renamed", []replication.Column{col("id", int4, true), col("photo", ByteaOID, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": `no longer has image column "img"`}, false},
		{"image retyped", []replication.Column{col("id", int4, true), col("img", text, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": "no longer bytea"}, false},
		{"key column dropped", []replication.Column{col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": `primary key column "id" is gone`, "b": `primary key column "id" is gone`}, false},
		{"key changed", []replication.Column{col("id", int4, true), col("img", ByteaOID, false), col("other", ByteaOID, false), col("k2", int4, true)}, 'd',
			map[string]string{"a": "primary key is no longer (id)", "b": "primary key is no longer (id)"}, false},
		{"key moved to another column", []replication.Column{col("id", int4, false), col("img", ByteaOID, false), col("other", ByteaOID, false), col("k2", int4, true)}, 'd',
			map[string]string{"a": "primary key is no longer", "b": "primary key is no longer"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel := &replication.Relation{OID: 1, Namespace: "public", Name: "d", ReplicaIdentity: tc.ident, Columns: tc.cols}
			got, misfits := Fit(rel, rules)
			if len(misfits) != len(tc.misfits) {
				t.Fatalf("misfits %v, want %v", misfits, tc.misfits)
			}
			for rule, want := range tc.misfits {
				if !strings.Contains(misfits[rule], want) {
					t.Errorf("rule %s: %q, want it to say %q", rule, misfits[rule], want)
				}
			}
			if len(tc.misfits) == 0 && got.Retyped != tc.retyped {
				t.Errorf("Retyped = %v, want %v", got.Retyped, tc.retyped)
			}
			if len(tc.misfits) == 0 && (len(got.Key) != 1 || got.Key[0] != 0 || got.Image["img"] != 1 || got.Image["other"] != 2) {
				t.Errorf("positions %+v", got)
			}
		})
	}
}
