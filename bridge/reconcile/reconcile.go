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
// whether the row's image is NULL.
type Key struct {
	JSON      []byte
	ImageNull bool
}

// Deps is every database operation of a reconciliation of one rule.
type Deps interface {
	// SourceKeys returns up to limit keys of the source relation scope
	// (index into Options.Scopes; -1: the rule's source table) after
	// after (nil: from the first), in key order.
	SourceKeys(ctx context.Context, scope int, after []byte, limit int) ([]Key, error)
	// TargetKeys returns up to limit keys of the target's rows after after,
	// in key order.
	TargetKeys(ctx context.Context, after []byte, limit int) ([][]byte, error)
	// InSource reports, for each key, whether the source holds it now.
	InSource(ctx context.Context, keys [][]byte) ([]bool, error)
	// Lacking reports, for each source key, whether the rule has no result
	// for it: no target row, or a NULL result of a non-NULL image without
	// an open errors row.
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

// Run reconciles one rule through d: first the target's rows whose source
// row is gone (deleted page by page, each delete checked against the
// source at its time), then the source's rows without a result (queued
// once, as one backfill over the range from the first to the last of
// them). Pages are bounded by o.Page keys and read in key order (keyset
// pagination): memory does not grow with the tables, and no lock or
// transaction outlives a page.
func Run(ctx context.Context, d Deps, o Options) (Report, error) {
	var rep Report
	page := o.Page
	if page <= 0 {
		page = DefaultPage
	}
	if o.Orphans {
		if err := orphans(ctx, d, o, page, &rep); err != nil {
			return rep, err
		}
	}
	if !o.Missing {
		return rep, nil
	}
	scopes := []int{-1}
	if o.Scopes > 0 {
		scopes = scopes[:0]
		for i := range o.Scopes {
			scopes = append(scopes, i)
		}
	}
	var first, last []byte
	for _, sc := range scopes {
		f, l, err := missing(ctx, d, sc, page, &rep)
		if err != nil {
			return rep, err
		}
		if f == nil {
			continue
		}
		if first == nil {
			first, last = f, l
			continue
		}
		if before, err := d.Less(ctx, f, first); err != nil {
			return rep, err
		} else if before {
			first = f
		}
		if after, err := d.Less(ctx, last, l); err != nil {
			return rep, err
		} else if after {
			last = l
		}
	}
	if first == nil || o.DryRun {
		return rep, nil
	}
	q, err := d.Queue(ctx, first, last)
	rep.Queued = q
	return rep, err
}

// orphans reads the target's keys page by page and removes those the
// source no longer holds.
func orphans(ctx context.Context, d Deps, o Options, page int, rep *Report) error {
	var after []byte
	for {
		keys, err := d.TargetKeys(ctx, after, page)
		if err != nil {
			return err
		}
		rep.TargetRows += int64(len(keys))
		if len(keys) == 0 {
			return nil
		}
		in, err := d.InSource(ctx, keys)
		if err != nil {
			return err
		}
		var gone [][]byte
		for i, k := range keys {
			if !in[i] {
				gone = append(gone, k)
			}
		}
		rep.Orphans += int64(len(gone))
		if len(gone) > 0 && !o.DryRun {
			n, err := d.Remove(ctx, gone)
			rep.Removed += n
			if err != nil {
				return err
			}
		}
		if len(keys) < page {
			return nil
		}
		after = keys[len(keys)-1]
	}
}

// missing reads the keys of source scope sc page by page and returns the
// first and the last of those without a result (nil: none).
func missing(ctx context.Context, d Deps, sc, page int, rep *Report) (first, last []byte, err error) {
	var after []byte
	for {
		keys, err := d.SourceKeys(ctx, sc, after, page)
		if err != nil {
			return nil, nil, err
		}
		rep.SourceRows += int64(len(keys))
		if len(keys) == 0 {
			return first, last, nil
		}
		lacking, err := d.Lacking(ctx, keys)
		if err != nil {
			return nil, nil, err
		}
		for i, k := range keys {
			if !lacking[i] {
				continue
			}
			rep.Missing++
			if first == nil {
				first = k.JSON
			}
			last = k.JSON
		}
		if len(keys) < page {
			return first, last, nil
		}
		after = keys[len(keys)-1].JSON
	}
}
