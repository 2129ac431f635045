// Package render turns what the read-side commands gathered into what they
// print: the tables for people and the JSON documents for scripts of
// `pgimageai status`, `errors` and `switch`. It reads nothing and decides
// nothing: cmd/pgimageai reads the rows (package state, replication,
// bridge/leader) into a Status, an ErrorList or a SwitchList and hands them
// here. The JSON shapes are a contract (docs/operations.md, scripts, the
// console's documentation): their fields only ever grow.
package render

// Output formats of --format.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)
