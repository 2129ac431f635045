package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// The demo's fixed names and bounds.
const (
	demoSlot           = "pgimageai_demo" // slot and publication
	demoStartTimeout   = 60 * time.Second // until the bridge streams
	demoCatchUpTimeout = 60 * time.Second // until it applied the sample rows; more with OpenAI
	demoLocalModel     = "demo-local"
	demoOpenAIModel    = "demo-openai"
)

// Config is what the command line gives the demo; everything else (the
// database, the slot, the rules) the demo brings itself.
type Config struct {
	LogFormat  string             // text or json, of the bridge's warnings on stderr
	ByteBudget int64              // bridge.Limits.ByteBudget
	Registry   *provider.Registry // the providers the models name
}

// ErrUsage marks an error of the demo's settings (PGIMAGEAI_DEMO_SERVER):
// the command line exits with code 2 on it.
var ErrUsage = errors.New("usage")

// Run starts a throwaway PostgreSQL, configures two rules on a sample table,
// streams sample rows through the bridge in this process, prints the results
// and the errors, and removes everything again — also on errors and Ctrl-C.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) (err error) {
	began := time.Now()
	// `pgimageai demo | head` must not kill the demo before it cleaned up: a
	// closed stdout becomes a write error instead of SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	rows, err := sampleRows()
	if err != nil {
		return err
	}
	cl, err := startDemoServer(ctx, os.Getenv)
	if errors.Is(err, errNoPostgres) || errors.Is(err, ErrUsage) {
		return err
	}
	if err != nil {
		return interrupted(ctx, fmt.Errorf("start PostgreSQL: %w", err))
	}
	defer func() {
		if stopErr := cl.Stop(); err == nil && stopErr != nil {
			err = stopErr
		}
	}()
	s := &session{cfg: c, cl: cl, rows: rows, stdout: stdout, stderr: stderr}
	if os.Getenv("OPENAI_API_KEY") != "" {
		s.openAI, s.openAIBase = true, os.Getenv("OPENAI_BASE_URL")
	}
	if err := s.run(ctx); err != nil {
		return interrupted(ctx, err)
	}
	if err := cl.Stop(); err != nil {
		return err
	}
	removed := cl.Dir
	if cl.Container != "" {
		removed = "its container " + shortID(cl.Container)
	}
	fmt.Fprintf(stdout, "\nStopped PostgreSQL and removed %s. The demo took %.1fs.\n", removed, time.Since(began).Seconds())
	fmt.Fprint(stdout, `Next, on your own database (wal_level=logical): pgimageai migrate --dsn "$DSN", insert a model
and rules into pgimageai.models and pgimageai.rules (see README), then pgimageai run --dsn "$DSN";
pgimageai status and pgimageai errors show how it is doing.
`)
	return s.check()
}

// interrupted turns the error of an interrupted demo into one clear message.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("interrupted; the throwaway PostgreSQL was stopped and removed")
	}
	return err
}

// session is one run of the demo against a started cluster.
type session struct {
	cfg                Config
	cl                 *cluster
	rows               []sampleRow
	openAI             bool   // the COMPLETE rule uses OpenAI
	openAIBase         string // OPENAI_BASE_URL; "" = the provider's default
	stdout, stderr     io.Writer
	results            []resultRow
	errors             []errorRow
	changes, callsMade int64
}

func (s *session) run(ctx context.Context) error {
	conn, err := pgconnect.Connect(ctx, s.cl.DSN())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := s.setup(ctx, conn); err != nil {
		return err
	}
	s.header(ctx, conn)

	took, err := s.stream(ctx, conn)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "\nInserted %d rows into demo.photos while the bridge streamed from slot %s;\n"+
		"it caught up in %.2fs (%d changes, %d provider calls).\n", len(s.rows), demoSlot, took.Seconds(), s.changes, s.callsMade)

	if err := s.read(ctx, conn); err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, "\nResults: demo.photos with demo.photo_captions (rule describe) and demo.photo_embeddings (rule embed)")
	if err := renderResults(s.stdout, s.results); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "\nErrors: the open rows of pgimageai.errors, %d per rule — empty (empty_image) and garbage\n"+
		"(unknown_format) never reach a provider; truncated.png does and cannot be decoded (provider_error).\n"+
		"The NULL image is no error: its results are NULL and no provider is called.\n", badSamples)
	return renderErrors(s.stdout, s.errors)
}

// setup creates the sample table, the targets, the models and the rules.
func (s *session) setup(ctx context.Context, conn *pgx.Conn) error {
	completeModel := demoLocalModel
	b := &pgx.Batch{}
	for _, q := range sampleTables {
		b.Queue(q)
	}
	b.Queue(`INSERT INTO pgimageai.models (name, provider, model) VALUES ($1, 'local', 'local')`, demoLocalModel)
	if s.openAI {
		completeModel = demoOpenAIModel
		var base *string
		if s.openAIBase != "" {
			base = &s.openAIBase
		}
		b.Queue(`INSERT INTO pgimageai.models (name, provider, base_url, model, api_key_env, options)
VALUES ($1, 'openai', $2, 'gpt-4o-mini', 'OPENAI_API_KEY', '{"max_retries": 2, "timeout": "30s"}')`, demoOpenAIModel, base)
	}
	b.Queue(sampleRules, completeModel, demoLocalModel)
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() }); err != nil {
		return fmt.Errorf("create the sample table and rules: %w", err)
	}
	return nil
}

// header says where the server runs and what the demo configured.
func (s *session) header(ctx context.Context, conn *pgx.Conn) {
	version := s.cl.Version
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	version, _, _ = strings.Cut(version, " ")
	if s.cl.Container != "" {
		fmt.Fprintf(s.stdout, "pgimageai demo: a throwaway PostgreSQL %s in Docker, container %s of image %s (%s), on 127.0.0.1:%d\n"+
			"(no PostgreSQL server binaries on this machine, or %s=docker)\n",
			version, shortID(s.cl.Container), s.cl.Image, s.cl.ImageHow, s.cl.Port, demoServerEnv)
	} else {
		fmt.Fprintf(s.stdout, "pgimageai demo: a throwaway PostgreSQL %s (%s) on 127.0.0.1:%d, data in %s\n",
			version, s.cl.BinDir, s.cl.Port, s.cl.Dir)
	}
	if s.cl.As != nil {
		fmt.Fprintf(s.stdout, "(running as root, so PostgreSQL runs as user %s)\n", s.cl.As.Name)
	}
	fmt.Fprintln(s.stdout, "\nMigrated schema pgimageai and configured, in SQL:")
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	completeModel, embedNote := demoLocalModel, ""
	if s.openAI {
		completeModel, embedNote = demoOpenAIModel, " (stays local: openai cannot embed images)"
		base := s.openAIBase
		if base == "" {
			base = "the OpenAI API"
		}
		fmt.Fprintf(tw, "  model %s\tprovider openai, gpt-4o-mini at %s (OPENAI_API_KEY is set)\n", demoOpenAIModel, base)
	}
	fmt.Fprintf(tw, "  model %s\tprovider local: offline, deterministic, computed from the decoded pixels\n", demoLocalModel)
	fmt.Fprintf(tw, "  rule describe\tAI_IMAGE_COMPLETE(%s, demo.photos.img, 'Describe the image') -> demo.photo_captions.caption\n", completeModel)
	fmt.Fprintf(tw, "  rule embed\tAI_IMAGE_EMBED(%s, demo.photos.img) -> demo.photo_embeddings.embedding%s\n", demoLocalModel, embedNote)
	tw.Flush()
}

// stream runs the bridge, inserts the sample rows once it streams, waits
// until it applied them, and stops it gracefully. It returns how long the
// bridge took to catch up after the insert.
func (s *session) stream(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	var h slog.Handler = slog.NewTextHandler(s.stderr, opts)
	if s.cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(s.stderr, opts)
	}
	b := bridge.New(bridge.Config{
		SourceDSN: s.cl.DSN(), Stream: bridge.Stream{Slot: demoSlot, Publication: demoSlot},
		Providers: bridge.Providers{Registry: s.cfg.Registry, Env: os.LookupEnv}, Limits: bridge.Limits{ByteBudget: s.cfg.ByteBudget},
		Logger: slog.New(h), Timing: bridge.Timing{StatusInterval: 200 * time.Millisecond, DrainTimeout: 30 * time.Second},
	})
	bctx, stopBridge := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(bctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopBridge()
		if err := <-done; err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		return nil
	}
	defer stop()

	// Streaming: the slot's walsender reached the end of the WAL (a slot is
	// active already while it is being created) and both rules finished
	// backfilling the (empty) table. Rows inserted earlier would be read by
	// the backfill and the stream alike: harmless, but twice the work.
	streaming := func() (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
  WHERE s.slot_name = $1 AND r.state = 'streaming')`, demoSlot).Scan(&ok)
		if err != nil || !ok {
			return false, err
		}
		backfills, err := state.Backfills(ctx, conn)
		done := 0
		for _, b := range backfills {
			if (b.Rule == "describe" || b.Rule == "embed") && b.State == "done" {
				done++
			}
		}
		return done == 2, err
	}
	if err := poll(ctx, done, demoStartTimeout, "the bridge to stream", streaming); err != nil {
		return 0, err
	}

	began := time.Now()
	ins := &pgx.Batch{}
	for _, r := range s.rows {
		ins.Queue("INSERT INTO demo.photos (id, name, img) VALUES ($1, $2, $3)", r.ID, r.Name, r.Img)
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return tx.SendBatch(ctx, ins).Close() }); err != nil {
		return 0, fmt.Errorf("insert the sample rows: %w", err)
	}
	// Everything committed before the message has been applied once the slot
	// confirmed a position past it.
	var mark string
	if err := conn.QueryRow(ctx, "SELECT pg_logical_emit_message(true, 'pgimageai-demo', 'caught up')::text").Scan(&mark); err != nil {
		return 0, err
	}
	confirmed := func() (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(confirmed_flush_lsn > $1::pg_lsn), false)
FROM pg_replication_slots WHERE slot_name = $2`, mark, demoSlot).Scan(&ok)
		return ok, err
	}
	timeout := demoCatchUpTimeout
	if s.openAI {
		timeout *= 3
	}
	if err := poll(ctx, done, timeout, "the bridge to apply the sample rows", confirmed); err != nil {
		return 0, err
	}
	took := time.Since(began)
	if err := stop(); err != nil {
		return 0, err
	}
	st := b.Stats()
	s.changes, s.callsMade = st.Changes, st.Calls
	return took, nil
}

// poll checks cond every 50ms until it holds, the bridge stopped (done), ctx
// ended or timeout passed.
func poll(ctx context.Context, done <-chan error, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("stopped")
			}
			return fmt.Errorf("bridge stopped while waiting for %s: %w", what, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// read loads the results and the open errors.
func (s *session) read(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT p.id, p.name, p.img, c.caption, e.embedding
FROM demo.photos p
LEFT JOIN demo.photo_captions c USING (id)
LEFT JOIN demo.photo_embeddings e USING (id)
ORDER BY p.id`)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	s.results, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (resultRow, error) {
		var r resultRow
		return r, row.Scan(&r.ID, &r.Name, &r.Img, &r.Caption, &r.Embedding)
	})
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	open, _, err := state.OpenErrors(ctx, conn, "", "", 0)
	if err != nil {
		return fmt.Errorf("read errors: %w", err)
	}
	s.errors = errorRows(open)
	return nil
}

// check fails the demo when a sample image got no caption or no embedding,
// so that a broken provider or bridge never passes for a demo that worked.
func (s *session) check() error {
	got := map[int]resultRow{}
	for _, r := range s.results {
		got[r.ID] = r
	}
	var missing []string
	for _, r := range s.rows {
		if res := got[r.ID]; r.Image && (res.Caption == nil || res.Embedding == nil) {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no caption or no embedding for %s: see the errors above", strings.Join(missing, ", "))
	}
	return nil
}
