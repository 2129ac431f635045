package archtest

import (
	"strings"
	"testing"
)

// TestImports fails on an import the layers do not allow, on a package in
// no layer, and on a package doc that does not name its layer.
func TestImports(t *testing.T) {
	_, pkgs, err := Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of the module; want the whole module", len(pkgs))
	}
	problems, paid := Rules{Layers, Denied, Debts}.Check(pkgs)
	for _, p := range problems {
		t.Error(p)
	}
	for _, p := range paid {
		t.Log("debt paid: " + p)
	}
}

// TestCheck proves the checker on a small graph: every kind of wrong import
// is reported, and a graph that keeps the rules passes.
func TestCheck(t *testing.T) {
	layers := []Layer{
		{Name: "leaf", Packages: []string{"leaf"}, StdOnly: true},
		{Name: "low", Packages: []string{"low/..."}, May: []string{"leaf"}},
		{Name: "high", Packages: []string{"high/...", "low/top"}, May: []string{"leaf", "low"}},
	}
	ok := func(path string, layer string, imports ...string) Package {
		return Package{Path: path, Layer: layer, Imports: imports}
	}
	tests := []struct {
		name   string
		pkgs   []Package
		denied map[Edge]string
		debts  map[Edge]string
		want   []string // substrings, one problem each
		paid   int
	}{
		{name: "rules kept", pkgs: []Package{ok("leaf", "leaf"), ok("low/a", "low", "leaf"), ok("low/b", "low", "low/a"), ok("high/x", "high", "low/a", "leaf")}},
		{name: "upward import", pkgs: []Package{ok("low/a", "low", "high/x"), ok("high/x", "high")},
			want: []string{"forbidden import: low/a (layer low) imports high/x (layer high); low may import low, leaf"}},
		{name: "longest pattern wins", pkgs: []Package{ok("low/a", "low", "low/top"), ok("low/top", "high")},
			want: []string{"low/a (layer low) imports low/top (layer high)"}},
		{name: "leaf imports the module", pkgs: []Package{ok("leaf", "leaf", "low/a"), ok("low/a", "low")},
			want: []string{"leaf (layer leaf) imports low/a: it may import the standard library only"}},
		{name: "leaf imports another module", pkgs: []Package{{Path: "leaf", Layer: "leaf", NonStd: []string{"example.com/x"}}},
			want: []string{"leaf (layer leaf) imports example.com/x"}},
		{name: "denied edge", pkgs: []Package{ok("low/a", "low"), ok("low/b", "low", "low/a")},
			denied: map[Edge]string{{"low/b", "low/..."}: "b stands alone"}, want: []string{"forbidden import: low/b imports low/a: b stands alone"}},
		{name: "debt tolerated", pkgs: []Package{ok("low/a", "low"), ok("low/b", "low", "low/a")},
			denied: map[Edge]string{{"low/b", "low/a"}: "b stands alone"}, debts: map[Edge]string{{"low/b", "low/a"}: "TODO"}},
		{name: "debt paid", pkgs: []Package{ok("low/a", "low"), ok("low/b", "low")},
			denied: map[Edge]string{{"low/b", "low/a"}: "b stands alone"}, debts: map[Edge]string{{"low/b", "low/a"}: "TODO"}, paid: 1},
		{name: "no layer", pkgs: []Package{ok("else", "")}, want: []string{"else: in no layer"}},
		{name: "doc names none", pkgs: []Package{ok("low/a", "")}, want: []string{`low/a: its package doc names no layer; add the line "Layer: low."`}},
		{name: "doc names another", pkgs: []Package{ok("low/a", "high")}, want: []string{"low/a: its package doc says layer high"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems, paid := Rules{layers, tt.denied, tt.debts}.Check(tt.pkgs)
			if len(problems) != len(tt.want) {
				t.Fatalf("problems = %q, want %d like %q", problems, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %q, want it to hold %q", problems[i], w)
				}
			}
			if len(paid) != tt.paid {
				t.Errorf("paid = %q, want %d", paid, tt.paid)
			}
		})
	}
}

// TestLayersTable keeps the table itself sound: names unique, May naming
// layers below only (so the layers stay a ladder, not a web).
func TestLayersTable(t *testing.T) {
	index := map[string]int{}
	for i, l := range Layers {
		if _, dup := index[l.Name]; dup {
			t.Errorf("layer %s twice", l.Name)
		}
		index[l.Name] = i
		for _, m := range l.May {
			j, ok := index[m]
			if !ok {
				t.Errorf("layer %s may import %s, which is not a layer below it", l.Name, m)
			}
			_ = j
		}
	}
	for e := range Debts {
		if _, ok := Denied[e]; !ok {
			t.Errorf("debt %v is not a denied edge", e)
		}
	}
}
