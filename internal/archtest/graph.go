package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Package is what the rules read of one package of the module.
type Package struct {
	Path    string   // module-relative import path, "" for the module root
	Dir     string   //
	Files   []string // non-test Go files, full paths
	Imports []string // module-relative paths of the module's packages it imports
	Foreign []string // full paths of what it imports from outside the module (std included)
	NonStd  []string // full paths of what it imports from other modules
	Layer   string   // as its package doc says, "" when it says none
}

// Load lists the module's packages with `go list -deps -json`, run in dir
// (any directory of the module).
func Load(dir string) (module string, pkgs []Package, err error) {
	mod := exec.Command("go", "list", "-m")
	mod.Dir = dir
	out, err := mod.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -m: %w", err)
	}
	module = strings.TrimSpace(string(out))
	cmd := exec.Command("go", "list", "-deps", "-json", module+"/...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list -deps -json: %w: %s", err, stderr.String())
	}
	type listed struct {
		ImportPath string
		Dir        string
		Standard   bool
		GoFiles    []string
		Imports    []string
		Module     *struct{ Path string }
	}
	std := map[string]bool{}
	var all []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return "", nil, fmt.Errorf("decode go list: %w", err)
		}
		std[p.ImportPath] = p.Standard
		all = append(all, p)
	}
	for _, p := range all {
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		pkg := Package{Path: rel(module, p.ImportPath), Dir: p.Dir}
		for _, f := range p.GoFiles {
			pkg.Files = append(pkg.Files, filepath.Join(p.Dir, f))
		}
		for _, imp := range p.Imports {
			switch {
			case imp == module || strings.HasPrefix(imp, module+"/"):
				pkg.Imports = append(pkg.Imports, rel(module, imp))
			case std[imp]:
				pkg.Foreign = append(pkg.Foreign, imp)
			default:
				pkg.Foreign = append(pkg.Foreign, imp)
				pkg.NonStd = append(pkg.NonStd, imp)
			}
		}
		if pkg.Layer, err = docLayer(pkg.Files); err != nil {
			return "", nil, err
		}
		pkgs = append(pkgs, pkg)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Path < pkgs[j].Path })
	return module, pkgs, nil
}

func rel(module, path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

var layerLine = regexp.MustCompile(`(?m)^Layer: ([a-z]+)\b`)

// docLayer returns the layer that the package doc in files names.
func docLayer(files []string) (string, error) {
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", err
		}
		if af.Doc == nil {
			continue
		}
		if m := layerLine.FindStringSubmatch(af.Doc.Text()); m != nil {
			return m[1], nil
		}
	}
	return "", nil
}

// match reports whether the module-relative path is pattern: "x/..." is x
// and everything under it, "..." is every package of the module.
func match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// LayerOf returns the layer of path: the one with the longest matching
// pattern, an exact path before a "/..." of the same length.
func LayerOf(layers []Layer, path string) (Layer, bool) {
	best, score := Layer{}, -1
	for _, l := range layers {
		for _, p := range l.Packages {
			if !match(p, path) {
				continue
			}
			s := 2 * len(strings.TrimSuffix(p, "/..."))
			if !strings.HasSuffix(p, "/...") {
				s++
			}
			if s > score {
				best, score = l, s
			}
		}
	}
	return best, score >= 0
}

// Rules are the import rules: layers, denied edges and the debts.
type Rules struct {
	Layers []Layer
	Denied map[Edge]string
	Debts  map[Edge]string
}

// Check returns what pkgs break of r, one line each, and the debts that
// are paid (their edge is gone).
func (r Rules) Check(pkgs []Package) (problems, paid []string) {
	byName := map[string]Layer{}
	for _, l := range r.Layers {
		byName[l.Name] = l
	}
	seenDebt := map[Edge]bool{}
	for _, p := range pkgs {
		l, ok := LayerOf(r.Layers, p.Path)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: in no layer; add its path to the layer it belongs to in internal/archtest/layers.go", show(p.Path)))
			continue
		}
		switch {
		case p.Layer == "":
			problems = append(problems, fmt.Sprintf("%s: its package doc names no layer; add the line \"Layer: %s.\"", show(p.Path), l.Name))
		case p.Layer != l.Name:
			problems = append(problems, fmt.Sprintf("%s: its package doc says layer %s, internal/archtest/layers.go puts it in %s", show(p.Path), p.Layer, l.Name))
		}
		if l.StdOnly && len(p.NonStd) > 0 {
			problems = append(problems, fmt.Sprintf("%s (layer %s) imports %s: it may import the standard library only", show(p.Path), l.Name, strings.Join(p.NonStd, ", ")))
		}
		for _, imp := range p.Imports {
			il, ok := LayerOf(r.Layers, imp)
			if !ok {
				continue // reported as a package of its own
			}
			if l.StdOnly {
				problems = append(problems, fmt.Sprintf("forbidden import: %s (layer %s) imports %s: it may import the standard library only", show(p.Path), l.Name, show(imp)))
				continue
			}
			if il.Name != l.Name && !contains(l.May, il.Name) {
				problems = append(problems, fmt.Sprintf("forbidden import: %s (layer %s) imports %s (layer %s); %s may import %s",
					show(p.Path), l.Name, show(imp), il.Name, l.Name, strings.Join(append([]string{l.Name}, l.May...), ", ")))
				continue
			}
			for e, why := range r.Denied {
				if !match(e.From, p.Path) || !match(e.To, imp) || imp == p.Path {
					continue
				}
				if _, owed := r.debt(p.Path, imp); owed {
					seenDebt[r.debtEdge(p.Path, imp)] = true
					continue
				}
				problems = append(problems, fmt.Sprintf("forbidden import: %s imports %s: %s", show(p.Path), show(imp), why))
			}
		}
	}
	for e, owner := range r.Debts {
		if !seenDebt[e] {
			paid = append(paid, fmt.Sprintf("%s -> %s (%s): the import is gone; delete it from Debts", e.From, e.To, owner))
		}
	}
	sort.Strings(problems)
	sort.Strings(paid)
	return problems, paid
}

func (r Rules) debt(from, to string) (string, bool) {
	e := r.debtEdge(from, to)
	s, ok := r.Debts[e]
	return s, ok && e != Edge{}
}

func (r Rules) debtEdge(from, to string) Edge {
	for e := range r.Debts {
		if match(e.From, from) && match(e.To, to) {
			return e
		}
	}
	return Edge{}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func show(path string) string {
	if path == "" {
		return "(module root)"
	}
	return path
}
