package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
)

//go:embed assets
var assets embed.FS

// Config is what the console is started with.
type Config struct {
	// Token is the secret every page but /healthz asks for; at least
	// MinTokenLength characters. It is never logged or shown.
	Token string
	// AllowRetry lets the errors page ask for retries; without it the
	// console only reads.
	AllowRetry bool
	Logger     *slog.Logger
	// Refresh is how often the overview polls itself; 0 = DefaultRefresh.
	Refresh time.Duration
	// SampleEvery is how often the calls chart samples; 0 = 10 seconds.
	SampleEvery time.Duration
}

// DefaultRefresh is the overview's poll interval.
const DefaultRefresh = 5 * time.Second

// DefaultTokenEnv is the environment variable that holds the token unless
// another is named (--console-token-env).
const DefaultTokenEnv = "PGIMAGEAI_CONSOLE_TOKEN"

// DefaultAddr is where the console listens unless told otherwise: loopback.
const DefaultAddr = "127.0.0.1:8080"

// Server serves the console. It is safe for concurrent use.
type Server struct {
	cfg      Config
	src      Source
	log      *slog.Logger
	tokenSum [32]byte
	csrfKey  [32]byte
	sessions *sessions
	pages    map[string]*template.Template
	thumbs   *thumbnailer
	rates    *sampler
	mux      *http.ServeMux
	now      func() time.Time
}

// New returns the console of src.
func New(cfg Config, src Source) (*Server, error) {
	if len(cfg.Token) < MinTokenLength {
		return nil, fmt.Errorf("the console token must be at least %d characters", MinTokenLength)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = sampleEvery
	}
	s := &Server{cfg: cfg, src: src, log: cfg.Logger, tokenSum: sha256.Sum256([]byte(cfg.Token)),
		sessions: newSessions(), thumbs: newThumbnailer(thumbCacheBytes), rates: newSampler(), now: time.Now}
	if _, err := rand.Read(s.csrfKey[:]); err != nil {
		return nil, err
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", s.authed(s.overview))
	m.HandleFunc("GET /rules/{name}", s.authed(s.rulePage))
	m.HandleFunc("GET /errors", s.authed(s.errorsPage))
	m.HandleFunc("GET /thumb", s.authed(s.thumb))
	m.HandleFunc("POST /retry", s.authed(s.retry))
	m.HandleFunc("/retry", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "a retry is a POST", http.StatusMethodNotAllowed)
	})
	m.HandleFunc("/", s.authed(func(w http.ResponseWriter, r *http.Request, _ ident) {
		s.fail(w, r, http.StatusNotFound, "no such page")
	}))
	s.mux = m
}

// maxForm bounds a POST's body.
const maxForm = 16 << 10

// ServeHTTP serves r with the console's security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	s.mux.ServeHTTP(w, r)
}

// ContentSecurityPolicy allows the console's own script, stylesheet and
// thumbnails and nothing else: no inline script or style, no frame, no
// form sent elsewhere.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// authed wraps a handler that needs the token: without it the answer is 401.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, ident)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who := s.identify(r)
		if who == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pgimageai console"`)
			s.render(w, r, http.StatusUnauthorized, "login", loginView{Base: s.base("", "Log in"), Why: "This page needs the console token."})
			return
		}
		if r.Method == http.MethodPost && !s.csrfOK(r, who) {
			s.fail(w, r, http.StatusForbidden, "the form's CSRF token is missing or wrong: reload the page and try again")
			return
		}
		h(w, r, who)
	}
}

// Run serves on ln until ctx ends, and samples the rules' calls meanwhile;
// then it shuts the server down (in-flight requests get 5 seconds).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		s.rates.run(gctx, s.src, s.cfg.SampleEvery, s.log)
		return nil
	})
	g.Go(func() error {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

// render executes page into a buffer and writes it with status: a failed
// template writes no half page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		s.log.Error("console page", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with an error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "message", messageView{Base: s.base("", http.StatusText(status)), Message: msg})
}

// failDB answers a read that failed: the error is logged and shown (it
// carries no secret: connection strings are never in it).
func (s *Server) failDB(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("console read", "what", what, "err", err)
	s.fail(w, r, http.StatusInternalServerError, what+": "+err.Error())
}
