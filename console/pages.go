package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/state"
	"github.com/pgimageai/pgimageai/value"
)

// ErrNoRule: the page names a rule that pgimageai.rules does not have.
var ErrNoRule = errors.New("no such rule")

// pageSize is how many results a rule's page shows.
const pageSize = 50

// errorsShown is how many open errors the errors page lists.
const errorsShown = 100

// similarShown is how many neighbours "similar images" shows.
const similarShown = 8

func (s *Server) overview(w http.ResponseWriter, r *http.Request, who ident) {
	ov, err := s.src.Overview(r.Context())
	if err != nil {
		s.failDB(w, r, "read the overview", err)
		return
	}
	now := s.now()
	open := map[string]int64{}
	for _, e := range ov.Errors {
		open[e.Rule] += e.Count
	}
	for i := range ov.Rules {
		ov.Rules[i].Calls = s.rates.series(ov.Rules[i].Name, now)
		ov.Rules[i].OpenErrors = open[ov.Rules[i].Name]
	}
	b := s.base(who, "Overview")
	b.Nav, b.Refresh = "overview", int(s.cfg.Refresh/time.Second)
	v := overviewView{Base: b, Overview: ov, PaceStale: paceStale}
	for _, bf := range ov.Backfills {
		if bf.State == string(value.BackfillDone) {
			continue
		}
		bv := backfillView{BackfillRow: bf, Rate: s.rates.progress("backfill:"+bf.Rule, bf.RowsDone, now)}
		if bv.Rate > 0 && bf.RowsTotal != nil && *bf.RowsTotal > bf.RowsDone {
			bv.ETA = seconds(float64(*bf.RowsTotal-bf.RowsDone) / bv.Rate)
		}
		v.Running = append(v.Running, bv)
	}
	s.render(w, r, http.StatusOK, "overview", v)
}

// paceStale is how old a model's stored pacing may be before the overview
// calls it stale: a running leader stores it every 5 seconds.
const paceStale = 30 * time.Second

func (s *Server) rulePage(w http.ResponseWriter, r *http.Request, who ident) {
	name := r.PathValue("name")
	q := r.URL.Query()
	page, err := s.src.Results(r.Context(), name, ResultQuery{Before: q.Get("before"), Key: q.Get("key"), Limit: pageSize})
	switch {
	case errors.Is(err, ErrNoRule):
		s.fail(w, r, http.StatusNotFound, "no rule named "+strconv.Quote(name))
		return
	case err != nil:
		s.failDB(w, r, "read the results of rule "+name, err)
		return
	}
	v := ruleView{Base: s.base(who, "Rule "+name), Page: page, Search: q.Get("key"), Before: q.Get("before")}
	v.Nav = "rules"
	if sim := q.Get("similar"); sim != "" {
		v.SimilarTo = sim
		if v.Similar, err = s.src.Similar(r.Context(), name, sim, similarShown); err != nil {
			v.SimilarErr = err.Error()
		}
	}
	s.render(w, r, http.StatusOK, "rule", v)
}

func (s *Server) errorsPage(w http.ResponseWriter, r *http.Request, who ident) {
	q := r.URL.Query()
	rule, reason := q.Get("rule"), q.Get("reason")
	errs, total, err := s.src.Errors(r.Context(), rule, reason, errorsShown)
	if err != nil {
		s.failDB(w, r, "read the open errors", err)
		return
	}
	counts, err := s.src.ErrorCounts(r.Context())
	if err != nil {
		s.failDB(w, r, "count the open errors", err)
		return
	}
	rows := make([]errorRow, len(errs))
	for i, e := range errs {
		rows[i] = errorRow{ConsoleError: e, Key: string(e.SourceKey), Format: formatOf(e.ImageHead)}
	}
	s.previews(r.Context(), rows)
	v := errorsView{Base: s.base(who, "Errors"), Rows: rows, Total: total, Counts: counts, Rule: rule, Reason: reason}
	v.Nav = "errors"
	s.render(w, r, http.StatusOK, "errors", v)
}

// previews makes the thumbnails of the errors that have an image, two at a
// time and for at most a few seconds in all: a row gets one where its image
// decodes, and shows its format and size where it does not.
func (s *Server) previews(ctx context.Context, rows []errorRow) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range rows {
		e := &rows[i]
		if e.ImageBytes == nil || *e.ImageBytes == 0 || e.Reason == functions.InvalidRule {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if _, err := s.thumbs.get(ctx, s.src, e.Rule, e.Key); err == nil {
				e.Thumb = thumbURL(e.Rule, e.Key)
			}
		}()
	}
	wg.Wait()
}

// formatOf names the format of an image from its first bytes.
func formatOf(head []byte) string {
	if len(head) == 0 {
		return ""
	}
	f, err := magic.Detect(head)
	if err != nil {
		return "unknown format"
	}
	return f.String()
}

// thumbURL is the address of the thumbnail of rule's row keyed key.
func thumbURL(rule, key string) string {
	return "/thumb?" + url.Values{"rule": {rule}, "key": {key}}.Encode()
}

func (s *Server) thumb(w http.ResponseWriter, r *http.Request, _ ident) {
	q := r.URL.Query()
	t, err := s.thumbs.get(r.Context(), s.src, q.Get("rule"), q.Get("key"))
	if err != nil {
		http.Error(w, "no thumbnail", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", t.ctype)
	w.Header().Set("Cache-Control", "private, max-age=300")
	w.Header().Set("Content-Length", strconv.Itoa(len(t.data)))
	_, _ = w.Write(t.data)
}

// retryable are the reasons a retry may name: every reason but invalid_rule,
// which is fixed by editing the rule.
var retryable = []functions.Reason{
	functions.EmptyImage, functions.UnknownFormat, functions.TooLarge, functions.UnsupportedFormat,
	functions.ProviderError, functions.BadResponse, functions.BudgetExhausted, functions.TargetRefused,
}

// retry asks for a retry of the open errors of a rule and reason: first a
// confirmation page, then (confirm=yes) the request itself.
func (s *Server) retry(w http.ResponseWriter, r *http.Request, who ident) {
	if !s.cfg.AllowRetry {
		s.fail(w, r, http.StatusForbidden, "this console is read-only: start it with --console-allow-retry to retry errors from here")
		return
	}
	req := RetryRequest{Rule: r.PostFormValue("rule"), Reason: functions.Reason(r.PostFormValue("reason")), Key: r.PostFormValue("key")}
	switch {
	case req.Reason != "" && !slices.Contains(retryable, req.Reason):
		s.fail(w, r, http.StatusBadRequest, "a retry names a reason among the retryable ones (an invalid_rule error is fixed by editing the rule)")
		return
	case req.Key != "" && (req.Rule == "" || !json.Valid([]byte(req.Key))):
		s.fail(w, r, http.StatusBadRequest, "a retry of one row names its rule and its key as JSON")
		return
	case req.Key != "":
		req.Reason = "" // one row, whatever its reason
	}
	n, err := s.src.CountRetryable(r.Context(), req)
	if err != nil {
		s.failDB(w, r, "count the open errors", err)
		return
	}
	rule, reason := req.Rule, req.Reason
	v := retryView{Base: s.base(who, "Retry"), Rule: rule, Reason: string(reason), Key: req.Key, Count: n}
	v.Nav = "errors"
	if r.PostFormValue("confirm") != "yes" || n == 0 {
		s.render(w, r, http.StatusOK, "confirm", v)
		return
	}
	if v.LSN, err = s.src.Retry(r.Context(), req); err != nil {
		s.failDB(w, r, "request the retry", err)
		return
	}
	v.Done = true
	s.log.Info("console retry requested", "rule", rule, "reason", string(reason), "one_row", req.Key != "", "rows", n, "lsn", v.LSN.String())
	s.render(w, r, http.StatusOK, "confirm", v)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.identify(r) != "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", loginView{Base: s.base("", "Log in")})
}

// loginDelay slows down the guessing of tokens.
const loginDelay = 300 * time.Millisecond

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.fail(w, r, http.StatusForbidden, "a login from another site is refused")
		return
	}
	if !s.tokenOK(r.PostFormValue("token")) {
		time.Sleep(loginDelay)
		s.render(w, r, http.StatusUnauthorized, "login", loginView{Base: s.base("", "Log in"), Why: "That is not the console token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.sessions.add(s.now()), Path: "/",
		MaxAge: int(sessionLife / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ ident) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// errorRow is an open error as the errors page shows it.
type errorRow struct {
	state.ConsoleError
	Key    string
	Format string // of its image head; "" without an image
	Thumb  string // its thumbnail's address; "" where the image does not decode
}
