// Package reconcile compares a rule's source rows with its target rows and
// repairs the drift: the target rows of source rows that no longer exist
// are deleted, and the source rows without a result are queued as a
// backfill (state.QueueBackfill), which the bridge runs like any backfill —
// through the Batch API where the rule's model has it.
//
// It is what `pgimageai reconcile` runs, and what the bridge runs by itself
// after partition DDL (a partition attached, detached, dropped or
// truncated), which sends nothing through pgoutput.
//
// It sits below cmd/pgimageai and bridge/engine, beside bridge/backfill: the
// page logic (Run) takes every database operation through Deps, so it is
// tested with a fake; DB implements Deps on a source and a target
// connection, which may be different databases. It calls nothing above it.
//
// Layer: parts.
package reconcile

import (
	"context"
	"fmt"
)

// Prefix is the prefix of the logical decoding message at which the engine
// empties the target of a rule whose source table is a new one (dropped
// and created again under its name). It does anything only when it holds a
// nonce the engine placed itself.
const Prefix = "pgimageai.reconcile"

// DefaultPage is how many keys one page of reconciliation reads: each page
// is a few short statements, so memory stays bounded by a page whatever
// the table's size, and no transaction spans pages.
const DefaultPage = 5000

// Key is one key of a page: its source_key JSON, and — for a source key —
// whether the row's image is NULL, or — for a target key — whether the row
// holds a result (its result column is not NULL).
type Key struct {
	JSON      []byte
	ImageNull bool // a source key's
	Value     bool // a target key's
}

// Deps is every database operation of a reconciliation of one rule.
type Deps interface {
	// SourceKeys returns up to limit keys of the source relation scope
	// (index into Options.Scopes; -1: the rule's source table) after
	// after (nil: from the first), in key order.
	SourceKeys(ctx context.Context, scope int, after []byte, limit int) ([]Key, error)
	// TargetKeys returns up to limit keys of the target's rows after after
	// (nil: from the first) up to upTo included (nil: to the last), in key
	// order.
	TargetKeys(ctx context.Context, after, upTo []byte, limit int) ([]Key, error)
	// OpenErrors reports, for each key, whether the rule has an open errors
	// row for it: a NULL result with a reason, not a missing one.
	OpenErrors(ctx context.Context, keys [][]byte) ([]bool, error)
	// Lacking reports, for each source key, whether the rule has no result
	// for it: no target row, or a NULL result of a non-NULL image without
	// an open errors row. It is the per-key lookup of a scoped pass.
	Lacking(ctx context.Context, keys []Key) ([]bool, error)
	// Remove deletes the target rows of keys whose source rows are absent
	// at the time of the delete (see DB.Remove), and returns how many.
	Remove(ctx context.Context, keys [][]byte) (int64, error)
	// Less reports whether key a comes before key b in the source's key
	// order.
	Less(ctx context.Context, a, b []byte) (bool, error)
	// Queue queues a backfill of the keys from first up to last (both
	// included), and says what it did.
	Queue(ctx context.Context, first, last []byte) (string, error)
}

// Options say what a reconciliation does.
type Options struct {
	DryRun bool // count only: delete nothing, queue nothing
	Page   int  // keys per page; 0 = DefaultPage
	// Orphans: look for target rows whose source row is gone (the whole
	// target is read). Missing: look for source rows without a result, in
	// Scopes (none: the whole source table).
	Orphans, Missing bool
	// Scopes are how many relations (partitions) the missing rows are
	// looked for in, instead of the whole source table: Deps.SourceKeys
	// takes their index.
	Scopes int
}

// Report is what a reconciliation found and did.
type Report struct {
	TargetRows int64 // target rows read
	SourceRows int64 // source keys read
	Orphans    int64 // target rows whose source row was gone when read
	Removed    int64 // of those, deleted (a row back in the source meanwhile is kept)
	Missing    int64 // source rows without a result
	Queued     string
}

// String says what r found and did, for a log line or the command's output.
func (r Report) String() string {
	s := fmt.Sprintf("%d target rows and %d source rows read; %d results of rows no longer in the source", r.TargetRows, r.SourceRows, r.Orphans)
	if r.Orphans > 0 {
		s += fmt.Sprintf(" (%d removed)", r.Removed)
	}
	s += fmt.Sprintf("; %d rows without a result", r.Missing)
	if r.Queued != "" {
		s += " (" + r.Queued + ")"
	}
	return s
}

// Run reconciles one rule through d. Without scopes it merges the
// source's and the target's keys, page by page in key order (keyset
// pagination): a page of source keys, then the target's keys up to the
// page's last one; target keys not in the page are results of rows no
// longer in the source, deleted page by page (each delete checked against
// the source at its time); source keys without a result are missing, and
// are queued once, as one backfill over the range from the first to the
// last of them. With scopes (partitions attached), the missing rows are
// looked for in those only, by key. Memory is bounded by a page whatever
// the tables' sizes, and no lock or transaction outlives a page.
func Run(ctx context.Context, d Deps, o Options) (Report, error) {
	var rep Report
	if o.Page <= 0 {
		o.Page = DefaultPage
	}
	var span span
	if o.Orphans || o.Missing && o.Scopes == 0 {
		if err := merge(ctx, d, o, &rep, &span); err != nil {
			return rep, err
		}
	}
	for sc := range o.Scopes {
		if !o.Missing {
			break
		}
		if err := scoped(ctx, d, sc, o.Page, &rep, &span); err != nil {
			return rep, err
		}
	}
	if span.first == nil || o.DryRun {
		return rep, nil
	}
	q, err := d.Queue(ctx, span.first, span.last)
	rep.Queued = q
	return rep, err
}

// span is the range of the missing keys: the first and the last.
type span struct{ first, last []byte }

// add widens s to key k, found in one pass in key order: within a pass a
// key is never before the first or after the last.
func (s *span) add(ctx context.Context, d Deps, k []byte, ordered bool) error {
	switch {
	case s.first == nil:
		s.first, s.last = k, k
		return nil
	case ordered:
		s.last = k
		return nil
	}
	if before, err := d.Less(ctx, k, s.first); err != nil {
		return err
	} else if before {
		s.first = k
	}
	if after, err := d.Less(ctx, s.last, k); err != nil {
		return err
	} else if after {
		s.last = k
	}
	return nil
}

// merge walks the source's and the target's keys together (see Run).
func merge(ctx context.Context, d Deps, o Options, rep *Report, sp *span) error {
	var lo []byte
	var gone [][]byte // orphans not yet removed: at most a page
	flush := func() error {
		if len(gone) == 0 || o.DryRun {
			gone = gone[:0]
			return nil
		}
		n, err := d.Remove(ctx, gone)
		rep.Removed += n
		gone = gone[:0]
		return err
	}
	for {
		src, err := d.SourceKeys(ctx, -1, lo, o.Page)
		if err != nil {
			return err
		}
		rep.SourceRows += int64(len(src))
		var hi []byte // the page's last key; nil: the last page, to the end
		if len(src) == o.Page {
			hi = src[len(src)-1].JSON
		}
		in := make(map[string]bool, len(src))
		for _, k := range src {
			in[string(k.JSON)] = true
		}
		held := make(map[string]bool, len(src)) // source key → its target row holds a result
		for after := lo; ; {
			tk, err := d.TargetKeys(ctx, after, hi, o.Page)
			if err != nil {
				return err
			}
			rep.TargetRows += int64(len(tk))
			for _, k := range tk {
				if in[string(k.JSON)] {
					held[string(k.JSON)] = k.Value
					continue
				}
				if !o.Orphans {
					continue
				}
				rep.Orphans++
				if gone = append(gone, k.JSON); len(gone) == o.Page {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if len(tk) < o.Page {
				break
			}
			after = tk[len(tk)-1].JSON
		}
		if err := flush(); err != nil {
			return err
		}
		if o.Missing && o.Scopes == 0 {
			var nulls [][]byte // NULL results of images: missing unless an errors row says why
			for _, k := range src {
				value, ok := held[string(k.JSON)]
				if ok && !value && !k.ImageNull {
					nulls = append(nulls, k.JSON)
				}
			}
			open := map[string]bool{}
			if len(nulls) > 0 {
				has, err := d.OpenErrors(ctx, nulls)
				if err != nil {
					return err
				}
				for i, k := range nulls {
					open[string(k)] = has[i]
				}
			}
			for _, k := range src {
				value, ok := held[string(k.JSON)]
				if ok && (value || k.ImageNull || open[string(k.JSON)]) {
					continue
				}
				rep.Missing++
				if err := sp.add(ctx, d, k.JSON, true); err != nil {
					return err
				}
			}
		}
		if hi == nil {
			return nil
		}
		lo = hi
	}
}

// scoped reads the keys of source scope sc page by page and adds those
// without a result to sp.
func scoped(ctx context.Context, d Deps, sc, page int, rep *Report, sp *span) error {
	var after []byte
	ordered := sp.first == nil // the first pass finds its keys in order
	for {
		keys, err := d.SourceKeys(ctx, sc, after, page)
		if err != nil {
			return err
		}
		rep.SourceRows += int64(len(keys))
		if len(keys) == 0 {
			return nil
		}
		lacking, err := d.Lacking(ctx, keys)
		if err != nil {
			return err
		}
		for i, k := range keys {
			if !lacking[i] {
				continue
			}
			rep.Missing++
			if err := sp.add(ctx, d, k.JSON, ordered); err != nil {
				return err
			}
		}
		if len(keys) < page {
			return nil
		}
		after = keys[len(keys)-1].JSON
	}
}
