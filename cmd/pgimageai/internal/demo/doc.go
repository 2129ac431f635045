// Package demo is `pgimageai demo`: a throwaway PostgreSQL (the machine's
// server binaries, or a Docker container), the sample rows of samples.go,
// two rules on them, the bridge streaming in this process, the results and
// errors as tables, and everything removed again.
//
// It sits beside the command line, not below it: it wires the bridge, the
// migrations and the providers the command gives it (Config.Registry) the way
// `pgimageai run` does, against a database of its own. The sample rows are one
// table (sampleRows); a new kind of sample is a row there and, when it needs
// more than the bytea column, a statement of setup.
//
// Layer: cmd.
package demo
