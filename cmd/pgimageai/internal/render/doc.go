// Package render turns what the commands gathered into what they print: the
// tables for people and the JSON documents for scripts of `pgimageai
// status`, `errors`, `switch`, `estimate` and `doctor`, and the reports of
// `retry`, `recover-slot` and `uninstall`. It reads nothing: cmd/pgimageai
// reads the rows (package state, replication, bridge/leader), asks the
// providers and package estimate, then hands a Status, an ErrorList, a
// SwitchList or an estimate.Report here. Beside the words it holds only
// what a view derives from the rows it shows (a slot's health and lag, a
// rule's state, a switch's ETA).
//
// The JSON shapes are a contract (docs/operations.md, scripts, the console's
// documentation): their fields only ever grow. The documents are built from
// small structs embedded by meaning, which encoding/json flattens in order;
// testdata/ holds them byte for byte (go test -update rewrites it).
//
// Layer: cmd.
package render

// Output formats of --format.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)
