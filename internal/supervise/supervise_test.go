package supervise

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestStop(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name     string
		run      func(ctx context.Context) error
		deadline time.Duration
		wantErr  error
		wantHard bool // the run's ctx was cancelled
		maxTime  time.Duration
	}{
		{name: "drains on the soft signal", deadline: time.Minute, maxTime: 5 * time.Second,
			run: func(ctx context.Context) error { <-Draining(ctx); return nil }},
		{name: "hard after the deadline", deadline: 50 * time.Millisecond, wantHard: true, maxTime: 5 * time.Second,
			run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{name: "hard at once without a deadline", wantHard: true, maxTime: 5 * time.Second,
			run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{name: "a failure is returned", deadline: time.Minute, wantErr: errBoom, maxTime: 5 * time.Second,
			run: func(ctx context.Context) error { return errBoom }},
		{name: "a failure after the hard stop is returned", wantErr: errBoom, wantHard: true, maxTime: 5 * time.Second,
			run: func(ctx context.Context) error { <-ctx.Done(); return errBoom }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			var hard atomic.Bool
			s.Go(tt.name, func(ctx context.Context) error {
				err := tt.run(ctx)
				hard.Store(ctx.Err() != nil)
				return err
			})
			t0 := time.Now()
			err := s.Stop(tt.deadline)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Stop = %v, want %v", err, tt.wantErr)
			}
			if hard.Load() != tt.wantHard {
				t.Fatalf("hard = %v, want %v", hard.Load(), tt.wantHard)
			}
			if d := time.Since(t0); d > tt.maxTime {
				t.Fatalf("Stop took %s", d)
			}
		})
	}
}

// TestJoinsNested: a goroutine started by a supervised one is joined too,
// and nothing is started once the supervisor has joined.
func TestJoinsNested(t *testing.T) {
	s := New()
	var ended atomic.Int32
	s.Go("parent", func(ctx context.Context) error {
		From(ctx).Go("child", func(ctx context.Context) error {
			<-Draining(ctx)
			time.Sleep(20 * time.Millisecond) // in flight at the drain
			ended.Add(1)
			return nil
		})
		<-Draining(ctx)
		ended.Add(1)
		return nil
	})
	if err := s.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := ended.Load(); n != 2 {
		t.Fatalf("%d goroutines ended before Stop returned, want 2", n)
	}
	ran := false
	s.Go("late", func(context.Context) error { ran = true; return nil })
	if err := s.Wait(); !errors.Is(err, ErrStopped) || ran {
		t.Fatalf("Go after the join: ran %v, Wait = %v", ran, err)
	}
}

// TestContext: a Context ends at the hard stop.
func TestContext(t *testing.T) {
	s := New()
	ctx := s.Context()
	if From(ctx) == nil || Draining(ctx) == nil {
		t.Fatal("Context carries no supervisor")
	}
	soft, cancel := Soft(ctx)
	defer cancel()
	s.Drain()
	if ctx.Err() != nil {
		t.Fatal("the soft stop cancelled the context")
	}
	if soft.Err() == nil {
		t.Fatal("the soft stop left Soft's context alive")
	}
	if late, cancel := Soft(ctx); late.Err() == nil {
		cancel()
		t.Fatal("Soft after the soft stop gave a live context")
	}
	s.Cancel()
	if ctx.Err() == nil {
		t.Fatal("the hard stop left the context alive")
	}
	if Draining(context.Background()) != nil || From(context.Background()) != nil {
		t.Fatal("an unsupervised context has a drain signal")
	}
}

// TestGoWhileStopping: Go called from outside the supervisor's goroutines
// while Stop waits is joined too, or, once the supervisor has joined,
// refused — never left running.
func TestGoWhileStopping(t *testing.T) {
	for range 50 {
		s := New()
		var started, ended atomic.Int32
		s.Go("first", func(ctx context.Context) error { <-Draining(ctx); return nil })
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20 {
				s.Go("late", func(ctx context.Context) error {
					started.Add(1)
					defer ended.Add(1)
					<-Draining(ctx)
					return nil
				})
			}
		}()
		_ = s.Stop(time.Minute)
		<-done
		_ = s.Wait()
		if started.Load() != ended.Load() {
			t.Fatalf("%d started, %d ended after Stop and Wait", started.Load(), ended.Load())
		}
	}
}
