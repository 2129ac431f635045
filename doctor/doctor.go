// Package doctor checks a database before and while pgimageai runs there:
// the server (version, wal_level, the role's privileges, free slots and WAL
// senders, max_slot_wal_keep_size), the bridge's slot and publication, each
// rule's source table and model, and whether each model's server answers. It
// sits beside the bridge, below cmd: it reads the catalogs and pgimageai's
// tables (through state) and changes nothing. Each check says what to do when
// it does not pass.
//
// Layer: operator.
package doctor

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/provider"
)

// Status is the outcome of one check.
type Status uint8

// The outcomes, from best to worst.
const (
	Pass Status = iota // ✓
	Warn               // !: works, but something to act on
	Fail               // ✗: pgimageai cannot run (or runs wrong) until fixed
)

// String returns pass, warn or fail.
func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Warn:
		return "warn"
	default:
		return "fail"
	}
}

// Mark is the status's one-character mark: ✓, ! or ✗.
func (s Status) Mark() string {
	switch s {
	case Pass:
		return "✓"
	case Warn:
		return "!"
	default:
		return "✗"
	}
}

// Check is one line of the report.
type Check struct {
	Area   string // server, role, slot, publication, rule R, model M
	Name   string // what was checked
	Status Status
	Detail string // what was found
	Fix    string // what to do; "" when it passes
}

// Report is every check, in the order run.
type Report []Check

// Worst is the worst status of the report.
func (r Report) Worst() Status {
	w := Pass
	for _, c := range r {
		w = max(w, c.Status)
	}
	return w
}

// Config is what doctor checks: the bridge's settings.
type Config struct {
	Slot, Publication, Group string
	Registry                 *provider.Registry
	Env                      provider.Env
	// BaseURLs are the providers' default base URLs, for models that name
	// none (openai: https://api.openai.com/v1, …); a provider without one
	// (local) is not probed.
	BaseURLs map[string]string
	// Probe checks that a model's server answers (ProbeHTTP when nil).
	Probe func(ctx context.Context, baseURL, key string) error
}

// Run runs every check on the source (src) and target (tgt) connections;
// the two are the same connection when the target is the source. Checks
// that cannot run because an earlier one failed (no schema: no rules) are
// reported as such. It returns an error only when a connection fails.
func Run(ctx context.Context, src, tgt *pgx.Conn, cfg Config) (Report, error) {
	if cfg.Probe == nil {
		cfg.Probe = ProbeHTTP
	}
	var r Report
	srv, err := readServer(ctx, src, cfg.Slot, cfg.Publication)
	if err != nil {
		return nil, err
	}
	r = append(r, srv.checks(cfg)...)
	rs, err := ruleChecks(ctx, src, tgt, cfg)
	if err != nil {
		return r, err
	}
	return append(r, rs...), nil
}

func pass(area, name, detail string) Check {
	return Check{Area: area, Name: name, Status: Pass, Detail: detail}
}

func warn(area, name, detail, fix string) Check {
	return Check{Area: area, Name: name, Status: Warn, Detail: detail, Fix: fix}
}

func fail(area, name, detail, fix string) Check {
	return Check{Area: area, Name: name, Status: Fail, Detail: detail, Fix: fix}
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }
