package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/backoff"
)

func TestDescending(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{"one column", []string{`"id"`}, `s."id" DESC`},
		{"two columns", []string{`"a"`, `"b"`}, `s."a" DESC, s."b" DESC`},
		{"a name holding a comma and a space", []string{pgx.Identifier{"id, part"}.Sanitize()}, `s."id, part" DESC`},
		{"comma names among others", []string{`"x"`, pgx.Identifier{"id, part"}.Sanitize(), pgx.Identifier{`q"uote, d`}.Sanitize()},
			`s."x" DESC, s."id, part" DESC, s."q""uote, d" DESC`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := descending("s.", tt.names); got != tt.want {
				t.Errorf("descending = %s, want %s", got, tt.want)
			}
		})
	}
}

// fakePages serves rows 1..n in pages of at most per rows (a byte cut when
// per < PageRows), failing the reads listed in fail once each.
type fakePages struct {
	n, per int
	fail   map[int]bool // read number → fail it
	reads  int
	marks  []string
	closed bool
	onRead func() // called at each read, when set
	// failMark: mark number → fail it (the marker is not written)
	failMark map[int]bool
	markN    int
}

func (f *fakePages) read(_ context.Context, _ *rules.Rule, last, _ []byte) ([]Row, int, error) {
	f.reads++
	if f.onRead != nil {
		f.onRead()
	}
	if f.fail[f.reads] {
		return nil, 0, errors.New("connection reset")
	}
	from := 1
	if last != nil {
		fmt.Sscanf(string(last), `{"id": %d}`, &from)
		from++
	}
	total := min(PageRows, max(f.n-from+1, 0)) // what the row limit alone gives
	var rows []Row
	for id := from; id <= f.n && len(rows) < min(f.per, total); id++ {
		rows = append(rows, Row{KeyJSON: []byte(fmt.Sprintf(`{"id": %d}`, id))})
	}
	return rows, total, nil
}

func (f *fakePages) mark(_ context.Context, id string) error {
	f.markN++
	if f.failMark[f.markN] {
		return errors.New("connection reset")
	}
	f.marks = append(f.marks, id)
	return nil
}

func (f *fakePages) close(context.Context) { f.closed = true }

func TestBackfillWorker(t *testing.T) {
	tests := []struct {
		name      string
		n, per    int
		fail      map[int]bool
		wantPages []int // rows per page
	}{
		{"empty table", 0, PageRows, nil, []int{0}},
		{"one short page", 5, PageRows, nil, []int{5}},
		{"row limit: a full page, then the rest", PageRows + 3, PageRows, nil, []int{PageRows, 3}},
		{"exactly a full page: an empty last page says done", PageRows, PageRows, nil, []int{PageRows, 0}},
		{"cut by bytes: short pages that are not the last", 10, 4, nil, []int{4, 4, 2}},
		{"a failed read is read again", 5, PageRows, map[int]bool{1: true}, []int{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakePages{n: tt.n, per: tt.per, fail: tt.fail}
			var got []int
			var seen []int
			w := &Worker{log: slog.New(slog.DiscardHandler), src: src, bo: backoff.Backoff{Min: time.Millisecond, Max: time.Millisecond},
				hand: func(_ context.Context, p *Page) error {
					got = append(got, len(p.Rows))
					for _, r := range p.Rows {
						var id int
						fmt.Sscanf(string(r.KeyJSON), `{"id": %d}`, &id)
						seen = append(seen, id)
					}
					close(p.Applied) // the engine applied it at its marker
					return nil
				}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			w.Work(ctx, &rules.Rule{Config: rules.Config{Name: "r"}}, nil, []byte(`{"id": 999999}`))
			if ctx.Err() != nil {
				t.Fatal("the worker did not finish")
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantPages) {
				t.Errorf("pages of %v rows, want %v", got, tt.wantPages)
			}
			for i, id := range seen {
				if id != i+1 {
					t.Fatalf("rows %v: want 1..%d once each, in key order", seen, tt.n)
				}
			}
			if len(seen) != tt.n || len(src.marks) != len(tt.wantPages) || !src.closed {
				t.Errorf("%d rows, %d markers, closed %v; want %d rows, a marker per page, closed", len(seen), len(src.marks), src.closed, tt.n)
			}
		})
	}
}

// TestBackfillMarkerFailed: a page whose marker could not be written is
// withdrawn (the engine lets it go, it would never be applied) and its rows
// are read again, in a page of their own.
func TestBackfillMarkerFailed(t *testing.T) {
	src := &fakePages{n: 5, per: PageRows, failMark: map[int]bool{1: true}}
	var handed []*Page
	w := &Worker{log: slog.New(slog.DiscardHandler), src: src, bo: backoff.Backoff{Min: time.Millisecond, Max: time.Millisecond},
		hand: func(_ context.Context, p *Page) error {
			handed = append(handed, p)
			if !p.Withdrawn {
				close(p.Applied)
			}
			return nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.Work(ctx, &rules.Rule{Config: rules.Config{Name: "r"}}, nil, []byte(`{"id": 999999}`))
	if len(handed) != 3 {
		t.Fatalf("%d pages handed, want 3: the page, its withdrawal, the page again", len(handed))
	}
	if !handed[1].Withdrawn || handed[1].ID != handed[0].ID || handed[0].Withdrawn {
		t.Errorf("handed %+v, %+v: want the first page, then its withdrawal by ID", handed[0], handed[1])
	}
	if handed[2].Withdrawn || len(handed[2].Rows) != 5 || handed[2].ID == handed[0].ID || src.marks[0] != handed[2].ID {
		t.Errorf("the page read again: %+v, markers %v", handed[2], src.marks)
	}
}

// TestBackfillReadsAhead: the worker reads the next page while the engine
// has not applied the last one yet, with at most readAhead pages not
// applied, and still hands every row once, in order.
func TestBackfillReadsAhead(t *testing.T) {
	const n = 10*PageRows + 7
	var unapplied, peak atomic.Int32
	src := &fakePages{n: n, per: PageRows}
	src.onRead = func() {
		if u := unapplied.Load(); u > peak.Load() {
			peak.Store(u)
		}
	}
	pages := make(chan *Page, 100)
	var rows int
	w := &Worker{log: slog.New(slog.DiscardHandler), src: src, bo: backoff.Backoff{Min: time.Millisecond, Max: time.Millisecond},
		hand: func(_ context.Context, p *Page) error {
			rows += len(p.Rows)
			unapplied.Add(1)
			pages <- p
			return nil
		}}
	go func() { // the engine: applies each page a little later
		for p := range pages {
			time.Sleep(2 * time.Millisecond)
			unapplied.Add(-1)
			close(p.Applied)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.Work(ctx, &rules.Rule{Config: rules.Config{Name: "r"}}, nil, []byte(`{"id": 999999}`))
	close(pages)
	if ctx.Err() != nil {
		t.Fatal("the worker did not finish")
	}
	if rows != n {
		t.Errorf("%d rows handed, want %d", rows, n)
	}
	if p := peak.Load(); p < 1 || p > readAhead-1 {
		t.Errorf("at a read, at most %d pages were not applied; want 1..%d (read ahead, bounded)", p, readAhead-1)
	}
	if u := unapplied.Load(); u != 0 {
		t.Errorf("the worker returned with %d pages not applied", u)
	}
}
