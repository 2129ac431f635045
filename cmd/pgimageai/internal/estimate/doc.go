// Package estimate is what `pgimageai estimate` works out for a rule: what
// was read of its images (Scan), what normalisation sends of them (Norm),
// the input and output tokens an image costs (the provider's documented
// rule, else the model's recorded usage), the calls, tokens and money of
// its backfill and of 1,000 new rows (Figures), and the version change the
// backfill would cost (VersionChange). It reads nothing: cmd/pgimageai reads
// the rows and builds the provider; package render prints a Report.
//
// Layer: cmd.
package estimate
