// Package logsum keeps per-row conditions from flooding the log: the first
// occurrence of a condition for a key (a rule, a lane) is logged at once;
// after it, at most one line per interval says how many more there were.
//
// Layer: toolkit.
package logsum

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Every is the default interval between two lines of one key.
const Every = time.Minute

// maxKeys bounds the keys remembered; past it, the oldest are forgotten
// (and their next occurrence is logged at once again).
const maxKeys = 4096

// Sampled logs one line per key and interval. The zero value is usable
// (interval Every); it is safe for concurrent use.
type Sampled struct {
	Every time.Duration    // 0 = Every
	Now   func() time.Time // nil = time.Now

	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	logged time.Time // the last line
	held   int       // occurrences since it, not logged
}

// Log logs msg with args at level for key when none was logged for key in
// the interval, adding "more" (the occurrences held back since the last
// line) when there were any; otherwise it counts the occurrence.
func (s *Sampled) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if log == nil {
		return
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	every := s.Every
	if every <= 0 {
		every = Every
	}
	t := now()
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string]*entry{}
	}
	e := s.keys[key]
	if e != nil && t.Sub(e.logged) < every {
		e.held++
		s.mu.Unlock()
		return
	}
	if e == nil {
		if len(s.keys) >= maxKeys {
			s.forget(t, every)
		}
		e = &entry{}
		s.keys[key] = e
	}
	held := e.held
	e.held, e.logged = 0, t
	s.mu.Unlock()
	if held > 0 {
		args = append(args, "more", held)
	}
	log.Log(context.Background(), level, msg, args...)
}

// forget drops the keys whose interval is over (their next occurrence is
// logged at once whether remembered or not, save the count held back) and,
// when that is not enough, every key; s.mu is held.
func (s *Sampled) forget(t time.Time, every time.Duration) {
	for k, e := range s.keys {
		if t.Sub(e.logged) >= every {
			delete(s.keys, k)
		}
	}
	if len(s.keys) >= maxKeys {
		clear(s.keys)
	}
}
