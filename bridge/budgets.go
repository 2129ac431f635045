package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/state"
)

// Budget caps what a model may spend per UTC day (its max_calls_per_day and
// max_tokens_per_day options); 0 is no cap.
type Budget struct {
	Calls, Tokens int64
}

// budgets counts what each model spent on the current UTC day: the calls and
// tokens pgimageai.usage held at start, plus every call since — counted when
// it starts (so calls in flight count) and given back when it got no
// answer. A call that would pass a cap is refused with budget_exhausted. It
// is safe for concurrent use.
type budgets struct {
	mu      sync.Mutex
	now     func() time.Time
	day     time.Time              // the UTC day counted
	spent   map[string]state.Spent // by model name
	metrics *metrics.Metrics
}

func newBudgets(now func() time.Time, day time.Time, spent map[string]state.Spent, m *metrics.Metrics) *budgets {
	if spent == nil {
		spent = map[string]state.Spent{}
	}
	return &budgets{now: now, day: day, spent: spent, metrics: m}
}

func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// rollover starts a new day's count when the UTC day changed, and reports
// whether it did. b.mu is held.
func (b *budgets) rollover() bool {
	today := utcDay(b.now())
	if !today.After(b.day) {
		return false
	}
	b.day, b.spent = today, map[string]state.Spent{}
	return true
}

// newDay reports whether a UTC day began since the last call (the rows
// refused yesterday may be retried).
func (b *budgets) newDay() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rollover()
}

// reserve counts one call of model under cap, or returns the
// budget_exhausted error when the cap is reached.
func (b *budgets) reserve(model string, cap Budget) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rollover()
	s := b.spent[model]
	switch {
	case cap.Calls > 0 && s.Calls >= cap.Calls:
		return b.exhausted(model, fmt.Sprintf("%d calls (max_calls_per_day)", cap.Calls))
	case cap.Tokens > 0 && s.Tokens >= cap.Tokens:
		return b.exhausted(model, fmt.Sprintf("%d tokens (max_tokens_per_day)", cap.Tokens))
	}
	s.Calls++
	b.spent[model] = s
	b.observe(model, s, cap)
	return nil
}

func (b *budgets) exhausted(model, what string) error {
	return &functions.Error{Reason: functions.BudgetExhausted, ImageBytes: -1,
		Detail: fmt.Sprintf("model %s spent its budget of %s for %s UTC; no call was made. The row is retried after 00:00 UTC, or at once by pgimageai retry --reason budget_exhausted once the budget is raised",
			model, what, b.day.Format(time.DateOnly))}
}

// settle records the end of a reserved call: answered calls keep their
// count and add their tokens; a call without an answer gives its count back.
func (b *budgets) settle(model string, cap Budget, answered bool, tokens int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rollover() {
		return // counted on a day that is over
	}
	s := b.spent[model]
	if answered {
		s.Tokens += tokens
	} else {
		s.Calls--
	}
	b.spent[model] = s
	b.observe(model, s, cap)
}

func (b *budgets) observe(model string, s state.Spent, cap Budget) {
	b.metrics.Budget(model, "calls", s.Calls, cap.Calls)
	b.metrics.Budget(model, "tokens", s.Tokens, cap.Tokens)
}

// retryExhausted asks, once a new UTC day began, for a retry of the rows
// refused for a spent budget: a row of pgimageai.retry_requests, so that the
// retry happens at a WAL position like an operator's. A failure is tried
// again at the next check.
func (e *engine) retryExhausted(ctx context.Context) {
	if e.budgets.newDay() {
		e.retryBudgets = true
	}
	if !e.retryBudgets {
		return
	}
	n, err := state.CountRetryable(ctx, e.live.tgt, "", functions.BudgetExhausted)
	if err == nil && n > 0 {
		_, err = state.RequestRetry(ctx, e.live.src, "", functions.BudgetExhausted)
		if err == nil {
			e.log.Info("a new UTC day: retrying the rows refused for a spent budget", "rows", n)
		}
	}
	if err != nil {
		e.log.Warn("retrying the rows refused for a spent budget failed; trying again at the next check", "err", err)
		return
	}
	e.retryBudgets = false
}
