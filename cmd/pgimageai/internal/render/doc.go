// Package render turns what the commands gathered into what they print: the
// tables for people and the JSON documents for scripts of `pgimageai
// status`, `errors`, `switch`, `estimate` and `doctor`, and the reports of
// `retry`, `recover-slot` and `uninstall`. It reads nothing: cmd/pgimageai
// reads the rows (package state, replication, bridge/leader) and asks the
// providers, then hands a Status, an ErrorList, a SwitchList or an Estimate
// here. Beside the words it holds only the arithmetic of what it shows (an
// estimate's calls and cost scaled from its sample, a switch's ETA). The JSON shapes are a contract (docs/operations.md, scripts, the
// console's documentation): their fields only ever grow.
package render

// Output formats of --format.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)
