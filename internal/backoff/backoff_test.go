package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	tests := []struct {
		name     string
		min, max time.Duration
		ceilings []time.Duration // the ceiling of each successive delay
	}{
		{"replication defaults", 100 * time.Millisecond, 10 * time.Second, []time.Duration{
			100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
			1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second}},
		{"lane writes", 200 * time.Millisecond, 5 * time.Second, []time.Duration{
			200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
			3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{"max below min is min", time.Second, time.Millisecond, []time.Duration{time.Second, time.Second, time.Second}},
		{"max zero is min", time.Second, 0, []time.Duration{time.Second, time.Second}},
		{"zero waits not at all", 0, 0, []time.Duration{0, 0, 0}},
		{"negative min waits not at all", -time.Second, 0, []time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Backoff{Min: tt.min, Max: tt.max}
			// Jitter is random: draw each sequence many times.
			for round := 0; round < 50; round++ {
				b.Reset()
				for i, ceil := range tt.ceilings {
					if d := b.Next(); d < ceil/2 || d > ceil {
						t.Fatalf("round %d, attempt %d: delay %v outside [%v, %v]", round, i, d, ceil/2, ceil)
					}
				}
			}
		})
	}
}

func TestNextJitters(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := 0; i < 20; i++ {
		b := Backoff{Min: time.Second, Max: time.Second}
		seen[b.Next()] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 first delays of [500ms, 1s] were all %v: no jitter", seen)
	}
}

func TestReset(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: time.Hour}
	for i := 0; i < 10; i++ {
		b.Next()
	}
	b.Reset()
	if d := b.Next(); d > b.Min {
		t.Errorf("after Reset: %v > Min %v", d, b.Min)
	}
}

func TestSleep(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		min     time.Duration
		wantErr error
		atLeast time.Duration
	}{
		{"waits", context.Background(), 20 * time.Millisecond, nil, 10 * time.Millisecond},
		{"no delay", context.Background(), 0, nil, 0},
		{"canceled", canceled, time.Hour, context.Canceled, 0},
		{"canceled, no delay", canceled, 0, context.Canceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Backoff{Min: tt.min, Max: tt.min}
			t0 := time.Now()
			err := b.Sleep(tt.ctx)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Sleep = %v, want %v", err, tt.wantErr)
			}
			if el := time.Since(t0); el < tt.atLeast || el > time.Minute {
				t.Errorf("Sleep took %v, want at least %v", el, tt.atLeast)
			}
		})
	}
}
