package rules

import (
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

func TestFitSchemaChanges(t *testing.T) {
	source := &catalog.Table{Schema: "public", Name: "d", PrimaryKey: []string{"id"}, Identity: catalog.Identity{Kind: 'd', Key: []string{"id"}, Usable: true, PrimaryKey: true},
		Columns: []catalog.Column{{Name: "id", TypeOID: 23, TypeMod: -1}, {Name: "img", TypeOID: ByteaOID, TypeMod: -1}, {Name: "other", TypeOID: ByteaOID, TypeMod: -1}}}
	rules := []*Rule{{Config: Config{Name: "a", ImageColumn: "img"}, Source: source}, {Config: Config{Name: "b", ImageColumn: "other"}, Source: source}}
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
		{"replica identity made full", []replication.Column{col("id", int4, true), col("img", ByteaOID, true), col("other", ByteaOID, true)}, 'f', nil, false},
		{"replica identity made nothing", []replication.Column{col("id", int4, false), col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'n',
			map[string]string{"a": "changed from DEFAULT to NOTHING", "b": "changed from DEFAULT to NOTHING"}, false},
		{"image renamed", []replication.Column{col("id", int4, true), col("photo", ByteaOID, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": `no longer has image column "img"`}, false},
		{"image retyped", []replication.Column{col("id", int4, true), col("img", text, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": "no longer bytea"}, false},
		{"key column dropped", []replication.Column{col("img", ByteaOID, false), col("other", ByteaOID, false)}, 'd',
			map[string]string{"a": `key column "id" is gone`, "b": `key column "id" is gone`}, false},
		{"key changed", []replication.Column{col("id", int4, true), col("img", ByteaOID, false), col("other", ByteaOID, false), col("k2", int4, true)}, 'd',
			map[string]string{"a": "key (replica identity DEFAULT) is no longer (id)", "b": "key (replica identity DEFAULT) is no longer (id)"}, false},
		{"key moved to another column", []replication.Column{col("id", int4, false), col("img", ByteaOID, false), col("other", ByteaOID, false), col("k2", int4, true)}, 'd',
			map[string]string{"a": "is no longer (id)", "b": "is no longer (id)"}, false},
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

func TestFitReplicaIdentities(t *testing.T) {
	const int4, text, photo = 23, 25, 90001 // photo: a domain over bytea
	cols := []catalog.Column{{Name: "id", TypeOID: int4, TypeMod: -1, Underlying: int4}, {Name: "code", TypeOID: text, TypeMod: -1, Underlying: text},
		{Name: "img", TypeOID: photo, TypeMod: -1, Underlying: ByteaOID}}
	byIndex := &catalog.Table{Schema: "public", Name: "d", Columns: cols, Identity: catalog.Identity{Kind: 'i', Index: "d_code", Key: []string{"code"}, Usable: true}}
	full := &catalog.Table{Schema: "public", Name: "d", Columns: cols, PrimaryKey: []string{"id"}, Identity: catalog.Identity{Kind: 'f', Key: []string{"id"}, Usable: true, PrimaryKey: true}}
	col := func(name string, oid uint32, key bool) replication.Column {
		return replication.Column{Name: name, TypeOID: oid, TypeModifier: -1, Key: key}
	}
	tests := []struct {
		name    string
		source  *catalog.Table
		cols    []replication.Column
		ident   byte
		wantKey int    // index of the key column when it fits
		misfit  string // substring of why; "" = fits
	}{
		{"using index keyed by the index", byIndex, []replication.Column{col("id", int4, false), col("code", text, true), col("img", photo, false)}, 'i', 1, ""},
		{"identity index replaced", byIndex, []replication.Column{col("id", int4, true), col("code", text, false), col("img", photo, false)}, 'i', 0, "is no longer (code)"},
		{"using index made default", byIndex, []replication.Column{col("id", int4, true), col("code", text, false), col("img", photo, false)}, 'd', 0, "key (replica identity DEFAULT) is no longer (code)"},
		{"using index made full", byIndex, []replication.Column{col("id", int4, true), col("code", text, true), col("img", photo, true)}, 'f', 1, ""},
		{"full made default, same key", full, []replication.Column{col("id", int4, true), col("code", text, false), col("img", photo, false)}, 'd', 0, ""},
		{"full keyed by the primary key", full, []replication.Column{col("id", int4, true), col("code", text, true), col("img", photo, true)}, 'f', 0, ""},
		{"domain image made text", byIndex, []replication.Column{col("id", int4, false), col("code", text, true), col("img", text, false)}, 'i', 0, "no longer bytea"},
		{"domain image made bytea", byIndex, []replication.Column{col("id", int4, false), col("code", text, true), col("img", ByteaOID, false)}, 'i', 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rel := &replication.Relation{OID: 1, Namespace: "public", Name: "d", ReplicaIdentity: tc.ident, Columns: tc.cols}
			got, misfits := Fit(rel, []*Rule{{Config: Config{Name: "a", ImageColumn: "img"}, Source: tc.source}})
			if tc.misfit == "" {
				if len(misfits) != 0 || len(got.Key) != 1 || got.Key[0] != tc.wantKey || got.Image["img"] != 2 {
					t.Fatalf("misfits %v, positions %+v; want key at %d, image at 2", misfits, got, tc.wantKey)
				}
				return
			}
			if !strings.Contains(misfits["a"], tc.misfit) {
				t.Fatalf("misfit %q, want it to say %q", misfits["a"], tc.misfit)
			}
		})
	}
}
