package reconn

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/backoff"
)

// Pair is a connection to the source and one to the target, used by one
// goroutine (the engine's) for the configuration, the reads of unchanged
// TOAST values, retries and backfill state.
type Pair struct {
	Src, Tgt *Conn
}

// NewPair returns the Pair of srcDSN and tgtDSN, not yet connected.
func NewPair(srcDSN, tgtDSN string) *Pair {
	return &Pair{Src: New("source", srcDSN, nil), Tgt: New("target", tgtDSN, nil)}
}

// Close closes both.
func (p *Pair) Close(ctx context.Context) {
	p.Src.Drop(ctx)
	p.Tgt.Drop(ctx)
}

// Retrying runs f until it succeeds or ctx ends. f works through p's
// connections; after a failure they are closed, so that the next attempt
// reconnects on fresh sessions (a broken one, or one that began while the
// database was read-only). So a source or target briefly unusable — a
// restart, a network cut, writes refused — delays the caller, instead of
// stopping it; each failure is logged as a warning naming what. f must be
// safe to run again.
func (p *Pair) Retrying(ctx context.Context, log *slog.Logger, what string, f func(src, tgt *pgx.Conn) error) error {
	bo := backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
	for attempt := 1; ; attempt++ {
		src, tgt, err := p.Conns(ctx)
		if err == nil {
			err = f(src, tgt)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn(what+" failed; retrying", "attempt", attempt, "err", err)
		p.Close(ctx)
		if err := bo.Sleep(ctx); err != nil {
			return err
		}
	}
}

// Conns connects both where needed and returns them.
func (p *Pair) Conns(ctx context.Context) (src, tgt *pgx.Conn, err error) {
	if src, err = p.Src.Get(ctx); err != nil {
		return nil, nil, err
	}
	if tgt, err = p.Tgt.Get(ctx); err != nil {
		return nil, nil, err
	}
	return src, tgt, nil
}
