package integration_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestDeletedRuleWithDroppedTargetReleasesTheSlot: a rule is deleted and its
// target dropped while its calls are in flight. Before, the lane retried the
// write (42P01) for good and the slot's confirmed_flush_lsn stopped there.
// Now the lane abandons those results — no rule would make the table again —
// the other rule's rows keep landing, the slot confirms past them, and the
// retired lane leaves status (its checkpoint row deleted).
func TestDeletedRuleWithDroppedTargetReleasesTheSlot(t *testing.T) {
	s := newSource(t)
	fast, slow := newFakeAI(t), newFakeAI(t)
	slow.Set(2*time.Second, nil)
	s.model(t, "fast", fast, `{}`)
	s.model(t, "slow", slow, `{"max_concurrency": 5}`)
	s.rule(t, "caption", "fast", "public.captions", "caption")
	s.slowRule(t, "slow")
	cfg := s.config(t)
	logs := captureLogs(t, &cfg)
	_, stop := s.start(t, cfg)
	for i := 1; i <= 5; i++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", i, pngImage(t, i))
	}
	integration.WaitFor(t, 10*time.Second, "the slow model's calls in flight", func() bool { return slow.Count() >= 5 })
	s.exec(t, "DELETE FROM pgimageai.rules WHERE name = 'slow'")
	s.exec(t, "DROP TABLE public.slow_out")
	for i := 6; i <= 8; i++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", i, pngImage(t, i))
	}
	s.sync(t, 30*time.Second) // the slot moves past everything
	if n := queryInt(t, s.conn, "SELECT count(caption) FROM public.captions"); n != 8 {
		t.Errorf("%d captions of the other rule, want 8", n)
	}
	integration.WaitFor(t, 10*time.Second, "the retired lane's checkpoint row to go", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.lane_checkpoints WHERE slot = $1 AND lane = 'public.slow_out'", s.slot) == 0
	})
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE tablename = 'slow_out'"); n != 0 {
		t.Errorf("the dropped target of a deleted rule was made again")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "lane retired") {
		t.Errorf("no log line says the lane retired")
	}
}
