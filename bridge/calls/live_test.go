package calls

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/cost"
	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
)

// countingGen is a TextGenerator that counts its calls.
type countingGen struct{ n atomic.Int32 }

func (g *countingGen) GenerateText(context.Context, provider.Image, string) (provider.Completion, error) {
	g.n.Add(1)
	return provider.Completion{Text: "t"}, nil
}

// TestQueuedCallOfADeletedRuleIsDropped: a call queued for a rule that is
// no longer live when its turn comes (deleted, disabled or changed since) is
// not sent: nothing is billed, and its item writes nothing (Unchanged).
func TestQueuedCallOfADeletedRuleIsDropped(t *testing.T) {
	for _, live := range []bool{true, false} {
		gen := &countingGen{}
		opts, _ := provider.ParseOptions(nil)
		prompt := "p"
		f, err := functions.Bind(functions.Complete, "m", struct{ provider.TextGenerator }{gen}, opts, &prompt)
		if err != nil {
			t.Fatal(err)
		}
		r := &rules.Rule{Config: rules.Config{Name: "r", Model: "m", Prompt: prompt}, Identity: rules.Identity{ModelKey: "m@1"}, Fn: f}
		cl := New(testSpawner(t), Cost{Budget: cost.NewBudget(1 << 20), Cache: cost.NewCache(16, 1<<20),
			Daily: cost.NewDaily(time.Now, time.Now(), nil, nil)}, nil, nil)
		cl.SetLive(func(*rules.Rule) bool { return live })
		c, err := cl.Start(context.Background(), r, nil, batchPNG, prompt, false)
		if err != nil {
			t.Fatal(err)
		}
		<-c.Done
		calls, dropped := gen.n.Load(), cl.Counters().Dropped.Load()
		if live && (calls != 1 || dropped != 0 || c.Unchanged) {
			t.Errorf("live rule: %d calls, %d dropped, unchanged %v; want the call made", calls, dropped, c.Unchanged)
		}
		if !live && (calls != 0 || dropped != 1 || !c.Unchanged) {
			t.Errorf("deleted rule: %d calls, %d dropped, unchanged %v; want no call, one dropped, nothing written", calls, dropped, c.Unchanged)
		}
	}
}
