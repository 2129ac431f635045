package replication

import "testing"

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{Insert: "INSERT", Update: "UPDATE", Delete: "DELETE", Truncate: "TRUNCATE", 0: "UNKNOWN", 9: "UNKNOWN"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", op, got, want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Null: "null", Unchanged: "unchanged", Text: "text", Binary: "binary", 0: "unknown", 9: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestRelation(t *testing.T) {
	r := &Relation{Namespace: "Odd Schema", Name: `My "Table"`, Columns: []Column{{Name: "id"}, {Name: "Img"}}}
	if got, want := r.Identifier().Sanitize(), `"Odd Schema"."My ""Table"""`; got != want {
		t.Errorf("Identifier = %s, want %s", got, want)
	}
	if r.ColumnIndex("Img") != 1 || r.ColumnIndex("img") != -1 {
		t.Error("ColumnIndex must match exact case")
	}
}
