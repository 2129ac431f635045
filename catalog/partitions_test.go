package catalog

import (
	"reflect"
	"testing"
)

func leaves(pairs ...uint32) []Leaf {
	var out []Leaf
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, Leaf{OID: pairs[i], Filenode: pairs[i+1]})
	}
	return out
}

func oids(ls []Leaf) []uint32 {
	var out []uint32
	for _, l := range ls {
		out = append(out, l.OID)
	}
	return out
}

func TestShapeDiff(t *testing.T) {
	tests := []struct {
		name                      string
		before, now               []Leaf
		attached, gone, rewritten []uint32
	}{
		{name: "unchanged", before: leaves(1, 10, 2, 20), now: leaves(1, 10, 2, 20)},
		{name: "attached", before: leaves(1, 10), now: leaves(1, 10, 3, 30), attached: []uint32{3}},
		{name: "detached or dropped", before: leaves(1, 10, 2, 20), now: leaves(2, 20), gone: []uint32{1}},
		{name: "truncated", before: leaves(1, 10, 2, 20), now: leaves(1, 11, 2, 20), rewritten: []uint32{1}},
		{name: "all at once", before: leaves(1, 10, 2, 20, 3, 30), now: leaves(2, 21, 3, 30, 4, 40),
			attached: []uint32{4}, gone: []uint32{1}, rewritten: []uint32{2}},
		{name: "not partitioned", before: nil, now: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Shape{Leaves: tt.before}.Diff(Shape{Leaves: tt.now})
			if got := oids(c.Attached); !reflect.DeepEqual(got, tt.attached) {
				t.Errorf("attached %v, want %v", got, tt.attached)
			}
			if got := oids(c.Gone); !reflect.DeepEqual(got, tt.gone) {
				t.Errorf("gone %v, want %v", got, tt.gone)
			}
			if got := oids(c.Rewritten); !reflect.DeepEqual(got, tt.rewritten) {
				t.Errorf("rewritten %v, want %v", got, tt.rewritten)
			}
			if want := tt.attached == nil && tt.gone == nil && tt.rewritten == nil; c.Empty() != want {
				t.Errorf("Empty() = %v, want %v", c.Empty(), want)
			}
		})
	}
}
