// Package rules owns the rules as the WAL shows them: it compiles rows of
// pgimageai.rules and pgimageai.models into immutable Rules (rule.go) —
// what the user configured (Config) and what the bridge derived of it:
// its function, source table and target table, which it creates or
// validates, and what it computes (Identity) — and indexes them into an immutable Set (set.go)
// that the engine swaps in at the commit that changes them. Live (live.go)
// keeps the configuration tables' content at the engine's WAL position,
// keeps the publication equal to the rules' source tables and the
// invalid_rule rows equal to what is invalid; a reload returns a Diff of
// the rules to stop and to start, which the engine applies. It also parses
// prompt templates (template.go) and says where a relation holds its
// rules' columns, or why it no longer fits them (fit.go).
//
// A rule's version (version.go) is what changes its results; a versioned
// rule whose version changed compiles into two rules — the live rule frozen
// at its old version and a side rule computing the new one into a shadow
// column — until the engine switches it (switching.go).
//
// It sits below bridge/engine and calls down into bridge/work (the
// work.Rule its items carry, Rule.Ref), functions, provider, catalog, sink
// (targets), state, replication and internal helpers only.
//
// Layer: parts.
package rules
