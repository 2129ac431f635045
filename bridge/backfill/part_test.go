package backfill

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/backoff"
)

// TestPartPages: workers of one run reading the ranges of two batches at
// once name their pages apart, mark each range's last page PartDone and
// never Done: the backfill is done only by its own last page.
func TestPartPages(t *testing.T) {
	tests := []struct {
		name      string
		part      int
		n, per    int
		wantPages int
		wantDone  bool // the last page is Done (a backfill's own worker)
	}{
		{name: "a backfill's own worker", part: 0, n: 10, per: 4, wantPages: 3, wantDone: true},
		{name: "batch 1's range", part: 1, n: 10, per: 4, wantPages: 3},
		{name: "batch 7's empty range", part: 7, n: 0, per: 4, wantPages: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var pages []*Page
			w := &Worker{log: slog.New(slog.DiscardHandler), run: "run1", bo: backoff.Backoff{Min: time.Millisecond, Max: time.Millisecond},
				hand: func(_ context.Context, p *Page) error {
					mu.Lock()
					pages = append(pages, p)
					mu.Unlock()
					close(p.Applied)
					return nil
				}}
			if tt.part > 0 {
				w = w.forPart(tt.part, &fakePages{n: tt.n, per: tt.per})
			} else {
				w.src = &fakePages{n: tt.n, per: tt.per}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			w.Work(ctx, &rules.Rule{Config: rules.Config{Name: "r"}}, nil, []byte(`{"id": 999999}`))
			if len(pages) != tt.wantPages {
				t.Fatalf("%d pages, want %d", len(pages), tt.wantPages)
			}
			for i, p := range pages {
				last := i == len(pages)-1
				wantID := fmt.Sprintf("r/run1/%d", i+1)
				if tt.part > 0 {
					wantID = fmt.Sprintf("r/run1/b%d.%d", tt.part, i+1)
				}
				if p.ID != wantID || p.Run != "run1" || p.Part != tt.part {
					t.Errorf("page %d: id %s, run %s, part %d; want %s, run1, %d", i, p.ID, p.Run, p.Part, wantID, tt.part)
				}
				if p.Done != (last && tt.wantDone) || p.PartDone != (last && tt.part > 0) {
					t.Errorf("page %d: Done %v, PartDone %v", i, p.Done, p.PartDone)
				}
				if tt.part > 0 && !strings.Contains(p.ID, fmt.Sprintf("/b%d.", tt.part)) {
					t.Errorf("page %d: id %s does not name its batch", i, p.ID)
				}
			}
		})
	}
}
