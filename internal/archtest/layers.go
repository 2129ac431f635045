// Package archtest holds the house's rules as tests: which layer may import
// which (layers.go, the table; imports_test.go reads `go list -deps -json`
// and fails on an import the table does not allow), and how big a type may
// grow (structure_test.go: fields per struct, methods per type).
//
// Every package belongs to one layer, found by the longest matching path in
// Layers below ("x/..." is x and everything under it), and its package doc
// says so in a line "Layer: <name>." A layer may import its own packages and
// the layers it lists in May; Denied forbids single edges inside what the
// layers allow, and Debts lists the denied edges that still exist, each with
// who removes it. To place a new package, give it a path a layer already
// covers (or add the path to the layer it belongs to) and the Layer line in
// its doc; nothing here names a file.
//
// Layer: test.
package archtest

// Layer is one floor of the house.
type Layer struct {
	Name     string
	Packages []string // module-relative import paths; "x/..." is x and below
	May      []string // the layers below it that it may import (its own is implied)
	StdOnly  bool     // it imports the standard library only, not even another module
	Why      string
}

// Layers, from the bottom up.
var Layers = []Layer{
	{Name: "value", Packages: []string{"value"}, StdOnly: true,
		Why: "the types every room shares: positions, reasons, states"},
	{Name: "toolkit", Packages: []string{"internal/...", "magic"}, May: []string{"value"},
		Why: "small helpers that know nothing of the product: backoff, circuits, connections, SQLSTATEs, supervision"},
	{Name: "codec", Packages: []string{"normalize/..."}, May: []string{"value", "toolkit"},
		Why: "images: decoding, conversion, bounds"},
	{Name: "provider", Packages: []string{"provider/..."}, May: []string{"value", "toolkit", "codec"},
		Why: "the AI providers and their pacing"},
	{Name: "store", Packages: []string{"store/..."}, May: []string{"value", "toolkit"},
		Why: "where images held by reference are read"},
	{Name: "postgres", Packages: []string{"catalog", "replication", "migrations"}, May: []string{"value", "toolkit"},
		Why: "PostgreSQL's catalog, its replication protocol, the schema"},
	{Name: "semantics", Packages: []string{"functions"}, May: []string{"value", "toolkit", "codec", "provider", "store"},
		Why: "what AI_IMAGE_COMPLETE and AI_IMAGE_EMBED mean"},
	{Name: "bookkeeping", Packages: []string{"state"}, May: []string{"value", "toolkit", "postgres", "store"},
		Why: "every statement on the pgimageai.* tables"},
	{Name: "metrics", Packages: []string{"metrics"}, May: []string{"value", "toolkit", "provider"},
		Why: "the Prometheus collectors"},
	{Name: "sink", Packages: []string{"sink"}, May: []string{"value", "toolkit", "postgres", "bookkeeping"},
		Why: "the target tables: writes, shadow columns, indexes"},
	{Name: "parts", Packages: []string{"bridge/..."},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink"},
		Why: "the bridge's parts: rules, work, cost, calls, lanes, backfills, switches, parking, the leader lock"},
	{Name: "engine", Packages: []string{"bridge/engine/..."},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink", "parts"},
		Why: "what a change means and where its effects go"},
	{Name: "bridge", Packages: []string{"bridge"},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink", "parts", "engine"},
		Why: "one leadership wired and run"},
	{Name: "operator", Packages: []string{"doctor/...", "console/..."},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink", "parts"},
		Why: "what operators read: doctor, the console; they never run the bridge"},
	{Name: "cmd", Packages: []string{"cmd/..."},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink", "parts", "engine", "bridge", "operator"},
		Why: "the command line: it wires, it decides nothing"},
	{Name: "test", Packages: []string{"integration/...", "internal/archtest", "internal/pgtest", "normalize/normtest", "provider/internal/fakeapi", "store/storetest"},
		May: []string{"value", "toolkit", "codec", "provider", "store", "postgres", "semantics", "bookkeeping", "metrics", "sink", "parts", "engine", "bridge", "operator", "cmd"},
		Why: "test support, imported by tests only"},
}

// Edge is one import, module-relative, "x/..." patterns allowed.
type Edge struct{ From, To string }

// Denied are single imports inside a layer (or between layers that allow
// each other) that the house does not allow.
var Denied = map[Edge]string{
	{"bridge/work", "bridge/rules"}: "the unit of work knows no rule: rules build items, items do not read rules",
	{"bridge/track", "bridge/..."}:  "the position tracker knows nothing of the rest of the bridge",
	{"bridge/leader", "bridge/..."}: "the leader lock depends on nothing of the rest of the bridge",
	{"replication", "catalog"}:      "the protocol reads no catalog",
	{"catalog", "replication"}:      "the catalog knows no protocol",
	{"migrations", "..."}:           "the schema is applied as it is: migrations imports nothing of ours",
	{"magic", "..."}:                "format detection imports nothing of ours",
}

// Debts are denied imports that exist today, with who removes them.
var Debts = map[Edge]string{}
