package integration_test

import (
	"testing"
	"time"
)

// BenchmarkChaos is the chaos measurement at full length: 90 s of
// random inserts, image updates, note-only updates, deletes and key moves on
// small inline images (chaos_workload_test.go), with 18 SIGKILLs of
// `pgimageai run` and 6 walsender terminations at random moments. It checks
// what TestChaosNeverPayTwice checks — the target exactly right, calls ≤
// image changes + 16 per fault — and reports the figures. Run it with
// scripts/bench (about two minutes).
func BenchmarkChaos(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	f := runChaos(b, chaosRun{duration: 90 * time.Second, kills: 18, terminations: 6,
		interval: 22 * time.Millisecond, minRows: 200, concurrency: 8, providerDelay: 30 * time.Millisecond})
	if f.kills != 18 || f.terminations != 6 {
		b.Errorf("%d SIGKILLs and %d walsender terminations happened, want 18 and 6", f.kills, f.terminations)
	}
	b.ReportMetric(float64(f.calls), "calls")
	b.ReportMetric(float64(f.imageChanges), "image-changes")
	b.ReportMetric(float64(f.faults()), "faults")
	b.ReportMetric(float64(f.calls)/float64(max(f.imageChanges, 1)), "calls/change")
	b.ReportMetric(float64(f.calls-f.imageChanges)/float64(max(f.faults(), 1)), "extra-calls/fault")
}
