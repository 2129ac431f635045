package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/pgread"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// backfillPage is how many rows a backfill reads per page, at most (pages
// are sized by bytes too, see pageBytes): each page is one short read
// transaction, so millions of rows never hold a long one. retryPage is the
// same for the reads of a retry, which come in chunks of keys.
const (
	backfillPage = 1000
	retryPage    = 200
)

// backfillPrefix is the prefix of the logical decoding message that places a
// backfill page in the stream.
const backfillPrefix = "pgimageai.backfill"

// backfillState is the engine's record of the running backfills. It is
// used by the engine's goroutine only; workers reach it through pages.
type backfillState struct {
	srcDSN  string                        // for the workers' connections
	tgtDSN  string                        // for the workers' reads of stored inputs
	workers map[string]context.CancelFunc // running backfill workers by rule
	pages   chan *page                    // pages read by workers, for the engine's goroutine
	pending map[string]*page              // pages waiting for their marker message
	rows    map[string]int                // rows read by each running backfill, for the log
	seen    map[uint32]map[keyDigest]bool // per source table with a backfill: keys of rows streamed since it started
	// truncated: the source tables with a backfill that were truncated
	// since it started.
	truncated map[uint32]bool
	runs      map[string]string // the run of each rule's current backfill worker
}

func newBackfillState(srcDSN, tgtDSN string) backfillState {
	return backfillState{srcDSN: srcDSN, tgtDSN: tgtDSN, workers: map[string]context.CancelFunc{}, pages: make(chan *page),
		pending: map[string]*page{}, rows: map[string]int{}, seen: map[uint32]map[keyDigest]bool{},
		truncated: map[uint32]bool{}, runs: map[string]string{}}
}

// page is one keyset page of a backfill, or the signal that it is done.
//
// A page is applied where its marker message — emitted by the worker right
// after the read — appears in the WAL. That position is after every
// transaction the read could see, so by then the engine has streamed every
// change made to those rows since the backfill started, and it skips the
// rows it streamed: the stream already handled them with a version at least
// as new as the page's (a change committed between the read and the marker
// is newer). Every later change is applied after the page. This is the
// version guard: a backfilled value never overwrites a newer streamed one.
type page struct {
	id          string
	rule        string // rule name
	run         string // the worker's run (see backfillWorker.run)
	fingerprint string // of the rule that started the backfill
	rows        []pageRow
	lastKey     []byte // source_key of the last row; nil when rows is empty
	done        bool
	applied     chan struct{} // closed when the engine applied the page
}

// pageBytes bounds the image bytes one page (or one retry read) fetches,
// beside its row limit: a page stops at the row that crosses it (SPEC §5b:
// reads are bounded by bytes before they are made).
const pageBytes = 8 << 20

type pageRow struct {
	key     []any
	keyJSON []byte
	img     []byte
	valid   bool   // false: NULL image
	size    int    // the image's length, also when it was not fetched
	over    bool   // larger than max_image_bytes: its bytes were not fetched
	head    []byte // its first 16 bytes, when over (a fetched image has its own)
	prompt  string // the rule's prompt, rendered for the row
	// unstored: the rule has no stored input for the row (read with the
	// page), so there is nothing to compare before the call.
	unstored bool
	ord      int64 // its key's ordinal in a retry's list

	// answer is a batch API's answer for the row (batchapi.go); nil: none.
	answer *state.BatchAnswer
}

// rowQuery selects rule's source rows: key columns, the image (only when
// within max_image_bytes), its length and head, and the template's columns.
type rowQuery struct {
	sql  string
	keys int
	cut  bool // the last column is the number of rows before the byte cut
	ord  bool // after the template's columns: the row's ordinal
}

// rowColumns returns the select list of a row query over source alias s:
// the key columns as k0…, the image as img (NULL when over max), its length
// n and head (NULL unless over max), the template's columns as t0…; and the
// key aliases.
func rowColumns(r *Rule) (cols string, keys []string) {
	img := "s." + pgx.Identifier{r.ImageColumn}.Sanitize()
	var parts []string
	for i, k := range r.KeyColumns {
		keys = append(keys, fmt.Sprintf("k%d", i))
		parts = append(parts, fmt.Sprintf("s.%s AS k%d", pgx.Identifier{k.Name}.Sanitize(), i))
	}
	// The head only of an image not fetched (a too_large row's): a fetched
	// image's call takes its own, and a slice of an out-of-line value is a
	// second read of its TOAST data (about a sixth of a page's cost).
	parts = append(parts, fmt.Sprintf("CASE WHEN octet_length(%[1]s) <= %[2]d THEN %[1]s END AS img, octet_length(%[1]s) AS n, CASE WHEN octet_length(%[1]s) > %[2]d THEN substring(%[1]s FROM 1 FOR 16) END AS head",
		img, r.Fn.MaxImageBytes()))
	if r.Template != nil {
		for i, c := range r.Template.columns {
			parts = append(parts, fmt.Sprintf("s.%s AS t%d", pgx.Identifier{c}.Sanitize(), i))
		}
	}
	return strings.Join(parts, ", "), keys
}

// templateColumns is how many columns r's prompt names.
func templateColumns(r *Rule) int {
	if r.Template == nil {
		return 0
	}
	return len(r.Template.columns)
}

// sourceKeys returns r's key columns, quoted and prefixed with alias.
func sourceKeys(r *Rule, alias string) string {
	var keys []string
	for _, k := range r.KeyColumns {
		keys = append(keys, alias+pgx.Identifier{k.Name}.Sanitize())
	}
	return strings.Join(keys, ", ")
}

// fetched is what a row counts against pageBytes: its image bytes when they
// are fetched.
func fetched(r *Rule) string {
	return fmt.Sprintf("CASE WHEN p.n <= %d THEN p.n ELSE 0 END", r.Fn.MaxImageBytes())
}

// backfillSQL returns the keyset page query of r: rows after the key given
// as source_key JSON ($2; none for the first page) up to the stop key ($1),
// in key order, at most backfillPage rows and — beyond the first row —
// pageBytes of images. Its last column is how many rows the row limit
// alone would give, so that a page cut by bytes is not taken for the last.
// jsonb_populate_record turns that JSON back into the key's own types.
//
// The first page has a query of its own: a lower bound that may be NULL
// ("$2 IS NULL OR key > $2") is no index condition in a generic plan, and
// every page would then scan the index from its start.
func backfillSQL(r *Rule, first bool) rowQuery {
	cols, keys := rowColumns(r)
	table := r.Source.Identifier().Sanitize()
	src := sourceKeys(r, "s.")
	kk := sourceKeys(r, "k.")
	order := strings.Join(keys, ", ")
	after := fmt.Sprintf("AND (%[1]s) > (SELECT %[2]s FROM jsonb_populate_record(NULL::%[3]s, $2::jsonb) AS k)", src, kk, table)
	if first {
		after = ""
	}
	return rowQuery{keys: len(r.KeyColumns), cut: true, sql: fmt.Sprintf(`SELECT q.* FROM (
  SELECT p.*, sum(%[7]s) OVER (ORDER BY %[6]s ROWS UNBOUNDED PRECEDING) - %[7]s AS before, count(*) OVER () AS total
  FROM (SELECT %[1]s FROM %[2]s AS s
    WHERE (%[3]s) <= (SELECT %[4]s FROM jsonb_populate_record(NULL::%[2]s, $1::jsonb) AS k) %[9]s
    ORDER BY %[3]s LIMIT %[5]d) AS p
) AS q WHERE q.before < %[8]d ORDER BY %[6]s`, cols, table, src, kk, backfillPage, order, fetched(r), pageBytes, after)}
}

// byKeysSQL returns the query of r's source rows whose keys are in the JSON
// array $1 of source_key objects, after its ordinal $2 (from 1), in the
// array's order, each with its ordinal: at most retryPage rows and —
// beyond the first row — pageBytes of images.
func byKeysSQL(r *Rule) rowQuery {
	cols, _ := rowColumns(r)
	table := r.Source.Identifier().Sanitize()
	return rowQuery{keys: len(r.KeyColumns), cut: true, ord: true, sql: fmt.Sprintf(`SELECT q.* FROM (
  SELECT p.*, sum(%[6]s) OVER (ORDER BY p.ord ROWS UNBOUNDED PRECEDING) - %[6]s AS before, count(*) OVER () AS total
  FROM (SELECT %[1]s, j.ord FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS j(key, ord)
    CROSS JOIN LATERAL jsonb_populate_record(NULL::%[2]s, j.key) AS k
    JOIN %[2]s AS s ON (%[3]s) = (%[4]s)
    WHERE j.ord > $2 ORDER BY j.ord LIMIT %[5]d) AS p
) AS q WHERE q.before < %[7]d ORDER BY q.ord`, cols, table, sourceKeys(r, "s."), sourceKeys(r, "k."), retryPage, fetched(r), pageBytes)}
}

func prefixed(p string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return strings.Join(out, ", ")
}

// readRows runs q on conn and returns its rows as page rows. It uses conn's
// type map: a pgtype.Map belongs to one goroutine, and a backfill worker
// reads on its own connection.
func readRows(ctx context.Context, conn *pgx.Conn, r *Rule, q rowQuery, args ...any) ([]pageRow, error) {
	rows, _, err := readPage(ctx, conn, r, q, args...)
	return rows, err
}

// readPage is readRows that also returns, for a query cut by bytes, how many
// rows the row limit alone would have given.
func readPage(ctx context.Context, conn *pgx.Conn, r *Rule, q rowQuery, args ...any) (out []pageRow, total int, err error) {
	typeMap := conn.TypeMap()
	rows, err := conn.Query(ctx, q.sql, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, 0, err
		}
		pr := pageRow{key: vals[:q.keys]}
		if n, ok := vals[q.keys+1].(int32); ok { // octet_length: NULL for a NULL image
			pr.valid, pr.size, pr.over = true, int(n), int64(n) > r.Fn.MaxImageBytes()
			pr.head, _ = vals[q.keys+2].([]byte)
			if !pr.over {
				if pr.img, _ = vals[q.keys].([]byte); pr.img == nil {
					pr.img = []byte{}
				}
			}
		}
		pr.prompt = r.Prompt
		if r.Template != nil {
			named := map[string]string{}
			for i, name := range r.Template.columns {
				c, _ := r.Source.Column(name)
				if named[name], err = textOf(typeMap, c.TypeOID, vals[q.keys+3+i]); err != nil {
					return nil, 0, err
				}
			}
			pr.prompt = r.Template.render(named)
		}
		if pr.keyJSON, err = sink.KeyJSON(typeMap, r.KeyColumns, pr.key); err != nil {
			return nil, 0, err
		}
		if q.ord {
			pr.ord, _ = vals[q.keys+3+templateColumns(r)].(int64)
		}
		if q.cut {
			n, _ := vals[len(vals)-1].(int64)
			total = int(n)
		}
		out = append(out, pr)
	}
	return out, total, rows.Err()
}

// startBackfill starts or resumes the backfill of r, unless it is done for
// what r computes (its fingerprint).
func (e *engine) startBackfill(ctx context.Context, r *Rule) error {
	if err := e.live.reconnect(ctx); err != nil {
		return err
	}
	b, found, err := state.LoadBackfill(ctx, e.live.tgt, r.Name)
	if err != nil {
		return err
	}
	last, stop := b.LastKey, b.StopKey
	switch {
	case found && b.Fingerprint == r.Fingerprint && b.State == "done":
		return nil
	case found && b.Fingerprint == r.Fingerprint:
		e.log.Info("backfill resumed", "rule", r.Name, "after", string(last))
	default:
		// Rows beyond the greatest key of now are new: the stream has them.
		last, stop = nil, nil
		rows, err := readRows(ctx, e.live.src, r, lastRowSQL(r))
		if err != nil {
			return fmt.Errorf("start backfill of %s: %w", r.Name, err)
		}
		if len(rows) == 1 {
			stop = rows[0].keyJSON
		}
		if err := state.StartBackfill(ctx, e.live.tgt, r.Name, r.Fingerprint, stop, r.Source.OID); err != nil {
			return err
		}
		if stop == nil { // an empty table: nothing to do
			e.log.Info("backfill done", "rule", r.Name, "rows", 0)
			return nil
		}
		e.log.Info("backfill started", "rule", r.Name, "source", r.Source.String(), "up_to", string(stop))
	}
	if e.bf.seen[r.Source.OID] == nil {
		e.bf.seen[r.Source.OID] = map[keyDigest]bool{}
	}
	e.stopBackfill(r.Name) // one worker per rule, also after a reload that failed half-way
	bctx, cancel := context.WithCancel(e.callCtx)
	e.bf.workers[r.Name] = cancel
	var nonce [16]byte
	rand.Read(nonce[:])
	run := hex.EncodeToString(nonce[:])
	e.bf.runs[r.Name] = run
	w := &backfillWorker{log: e.log, src: &sourcePages{dsn: e.bf.srcDSN, targetDSN: e.bf.tgtDSN}, hand: e.handPage, run: run,
		bo: backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}}
	if r.Batch != nil {
		go e.batchBackfill(bctx, w, r, last, stop) // batchapi.go
		return nil
	}
	go w.work(bctx, r, last, stop)
	return nil
}

// lastRowSQL selects the row of r's source table with the greatest key.
func lastRowSQL(r *Rule) rowQuery {
	cols, _ := rowColumns(r)
	var keys []string
	for _, k := range r.KeyColumns {
		keys = append(keys, pgx.Identifier{k.Name}.Sanitize())
	}
	return rowQuery{keys: len(r.KeyColumns), sql: fmt.Sprintf("SELECT %s FROM %s AS s ORDER BY %s LIMIT 1",
		cols, r.Source.Identifier().Sanitize(), descending("s.", keys))}
}

// descending is prefixed with " DESC" after each column: the ORDER BY of
// the greatest key. Each name is already quoted (and may itself contain ", "),
// so the list is built column by column, never rewritten as text.
func descending(p string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n + " DESC"
	}
	return strings.Join(out, ", ")
}

// stopBackfill stops the backfill worker of a rule, if one runs.
func (e *engine) stopBackfill(name string) {
	if cancel, ok := e.bf.workers[name]; ok {
		cancel()
		delete(e.bf.workers, name)
	}
	delete(e.bf.runs, name)
	for id, p := range e.bf.pending { // its pages are never applied
		if p.rule == name {
			delete(e.bf.pending, id)
			close(p.applied)
		}
	}
}

// pageSource is what a backfill worker needs of the source database: read
// a page of r's rows after last (nil: from the start) up to stop, and place a
// page's marker in the WAL. sourcePages implements it on a connection of its
// own; tests use a fake.
type pageSource interface {
	read(ctx context.Context, r *Rule, last, stop []byte) (rows []pageRow, total int, err error)
	mark(ctx context.Context, id string) error
	close(ctx context.Context)
}

// backfillWorker reads a rule's source rows in keyset pages and hands each
// to the engine, which applies it where its marker appears in the WAL. It
// takes its side effects through src and hand, so its logic is tested with
// a fake source and no database.
type backfillWorker struct {
	log  *slog.Logger
	src  pageSource
	hand func(ctx context.Context, p *page) error // to the engine's goroutine; waits for it
	bo   backoff.Backoff
	// run names the worker's pages: a secret nonce (any role may emit a
	// logical decoding message with the marker's prefix, but none can name
	// a page the bridge read, SPEC §5b), new for every start of a
	// backfill, so a page of a stopped worker is never applied to the next.
	run string
}

// backfillAhead is how many pages a backfill worker reads ahead: pages
// handed to the engine and marked whose marker has not come through the
// WAL yet. The next page is read while the engine applies the last one and
// its calls run, so neither the calls nor the read wait for the other; the
// pages held are at most backfillAhead × pageBytes of images.
const backfillAhead = 2

// work reads r's pages from after last up to stop, each handed over and
// marked, with at most backfillAhead of them not yet applied by the engine,
// so the byte budget, which the engine waits on while it applies a page,
// paces the backfill too. Failures are retried with backoff until ctx ends.
func (w *backfillWorker) work(ctx context.Context, r *Rule, last, stop []byte) {
	defer w.src.close(context.WithoutCancel(ctx))
	run := w.run
	seq := 0
	var ahead []*page // handed and marked, in order; not yet applied
	// settle waits until at most n pages are not applied.
	settle := func(n int) bool {
		for len(ahead) > n {
			select {
			case <-ahead[0].applied:
				ahead = ahead[1:]
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	for ctx.Err() == nil {
		if !settle(backfillAhead - 1) {
			return
		}
		rows, total, err := w.src.read(ctx, r, last, stop)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("backfill: page failed; retrying", "rule", r.Name, "err", err)
				_ = w.bo.Sleep(ctx) // the loop ends with ctx
			}
			continue
		}
		w.bo.Reset()
		seq++
		// A page cut by bytes (fewer rows than the row limit gave) is not
		// the last.
		p := &page{id: fmt.Sprintf("%s/%s/%d", r.Name, run, seq), rule: r.Name, run: run, fingerprint: r.Fingerprint,
			rows: rows, done: total < backfillPage && len(rows) == total, applied: make(chan struct{})}
		if len(rows) > 0 {
			p.lastKey = rows[len(rows)-1].keyJSON
		}
		if err := w.hand(ctx, p); err != nil {
			return
		}
		if err := w.src.mark(ctx, p.id); err != nil {
			if ctx.Err() == nil {
				// The page is never applied; the rows after the last
				// marked page are read again.
				w.log.Warn("backfill: marker failed; reading the page again", "rule", r.Name, "err", err)
				_ = w.bo.Sleep(ctx) // the loop ends with ctx
			}
			continue
		}
		ahead = append(ahead, p)
		if p.lastKey != nil {
			last = p.lastKey
		}
		if p.done {
			settle(0)
			return
		}
	}
}

// sourcePages is the pageSource of a backfill: one connection to the source,
// made again after a failure; each page is one short read transaction. A
// connection to the target reads which of a page's rows have a stored input
// (results.go), in one query: the others are called without a comparison.
type sourcePages struct {
	dsn, targetDSN string
	conn, target   *pgx.Conn
}

func (s *sourcePages) connect(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil && !s.conn.IsClosed() {
		return s.conn, nil
	}
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil { // not the parser's message: it may quote a password
		return nil, fmt.Errorf("connect to source: the connection string cannot be parsed")
	}
	pgread.Buffer(&cfg.Config) // a page is many rows of image bytes
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to source: %w", err)
	}
	s.conn = conn
	return conn, nil
}

func (s *sourcePages) read(ctx context.Context, r *Rule, last, stop []byte) ([]pageRow, int, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, 0, err
	}
	args := []any{string(stop)}
	if last != nil {
		args = append(args, string(last))
	}
	rows, total, err := readPage(ctx, conn, r, backfillSQL(r, last == nil), args...)
	if err != nil {
		s.close(ctx) // a fresh session next time
		return nil, 0, err
	}
	s.unstored(ctx, r, rows)
	return rows, total, nil
}

// unstored marks the rows that r has no stored input for. On a failure it
// marks none: each row is compared on its own, as before.
func (s *sourcePages) unstored(ctx context.Context, r *Rule, rows []pageRow) {
	if s.targetDSN == "" || len(rows) == 0 {
		return
	}
	if s.target == nil || s.target.IsClosed() {
		conn, err := pgx.Connect(ctx, s.targetDSN)
		if err != nil {
			return
		}
		s.target = conn
	}
	keys := make([]string, len(rows))
	for i, row := range rows {
		keys[i] = string(row.keyJSON)
	}
	stored, err := state.StoredInputs(ctx, s.target, r.Name, keys)
	if err != nil {
		s.target.Close(ctx)
		s.target = nil
		return
	}
	for i := range rows {
		rows[i].unstored = stored[i] == nil
	}
}

func (s *sourcePages) mark(ctx context.Context, id string) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	marker, _ := json.Marshal(map[string]string{"page": id})
	if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", backfillPrefix, string(marker)); err != nil {
		s.close(ctx)
		return err
	}
	return nil
}

func (s *sourcePages) close(ctx context.Context) {
	for _, c := range []**pgx.Conn{&s.conn, &s.target} {
		if *c != nil {
			(*c).Close(ctx)
			*c = nil
		}
	}
}

// handPage hands a worker's page to the engine's goroutine.
func (e *engine) handPage(ctx context.Context, p *page) error {
	select {
	case e.bf.pages <- p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// register keeps a page read by a worker until its marker message arrives.
func (e *engine) register(p *page) { e.bf.pending[p.id] = p }

// page applies the backfill page whose marker message m is, inside m's
// transaction: the rows as if inserted — except those whose version the
// engine streamed itself — and the progress.
func (e *engine) page(ctx context.Context, m *replication.Message) error {
	var marker struct{ Page string }
	if json.Unmarshal(m.Content, &marker) != nil {
		return nil
	}
	p := e.bf.pending[marker.Page]
	if p == nil {
		return nil // a page of an earlier run or of a stopped backfill
	}
	delete(e.bf.pending, marker.Page)
	defer close(p.applied)
	r := e.rules.byName[p.rule]
	if r == nil || r.Fingerprint != p.fingerprint || e.bf.runs[p.rule] != p.run {
		return nil // the rule changed, went away or started again; its new backfill covers it
	}
	seen := e.bf.seen[r.Source.OID]
	rows := p.rows
	if e.bf.truncated[r.Source.OID] {
		// The table was truncated since the backfill started: what the
		// page read before is gone, and every row since is streamed.
		rows = nil
	}
	lane := r.Target.Name()
	for i, row := range rows {
		pos, ok := e.admit(lane, i)
		if !ok || seen[digestKey(row.keyJSON)] {
			continue
		}
		it, err := e.resultItem(ctx, r, row, false)
		if err != nil {
			return err
		}
		it.lsn = m.LSN
		if err := e.emit(ctx, pos, it); err != nil {
			return err
		}
	}
	if pos, ok := e.admit(lane, len(p.rows)); ok {
		err := e.emit(ctx, pos, item{kind: itemBackfill, rule: r, target: r.Target, progress: state.BackfillProgress{
			Rule: r.Name, Fingerprint: r.Fingerprint, LastKey: p.lastKey, Rows: len(p.rows), Done: p.done,
			Batch: r.Batch != nil}}) // batchapi.go
		if err != nil {
			return err
		}
	}
	e.bf.rows[r.Name] += len(p.rows)
	if n := e.bf.rows[r.Name]; !p.done && n/backfillPage%10 == 0 {
		e.log.Info("backfill progress", "rule", r.Name, "rows", n, "last_key", string(p.lastKey))
	}
	if p.done {
		e.log.Info("backfill done", "rule", r.Name, "rows", e.bf.rows[r.Name])
		delete(e.bf.rows, r.Name)
		e.stopBackfill(r.Name)
		if !e.backfilling(r.Source.OID) {
			delete(e.bf.seen, r.Source.OID)
			delete(e.bf.truncated, r.Source.OID)
		}
	}
	return nil
}

// backfilling reports whether a backfill of some rule on table oid runs.
func (e *engine) backfilling(oid uint32) bool {
	for name := range e.bf.workers {
		if r := e.rules.byName[name]; r != nil && r.Source.OID == oid {
			return true
		}
	}
	return false
}

// resultItem starts the function call of a row read from the source.
// fresh: see engine.start.
func (e *engine) resultItem(ctx context.Context, r *Rule, row pageRow, fresh bool) (item, error) {
	it := item{kind: itemResult, rule: r, target: r.Target, sourceTable: r.Source.String(), key: row.key, keyJSON: row.keyJSON}
	if r.Template != nil {
		e.memo.set(r.Name, row.keyJSON, row.prompt)
	}
	switch {
	case row.over:
		// Not fetched: a too_large errors row, with the length and head.
		it.call = failedCall(r.Fn.TooLarge(row.size, row.head), row.size, row.head)
	case row.valid:
		var err error
		var look *lookup
		if !row.unstored && !e.lanes.rows.busy(r.Target.Name(), row.keyJSON) {
			look = &lookup{keyJSON: row.keyJSON, key: row.key}
		}
		if it.call = e.answeredCall(r, row, look); it.call != nil { // a batch answer (batchapi.go)
			break
		}
		if it.call, err = e.start(ctx, r, look, row.img, row.prompt, fresh); err != nil {
			return item{}, err
		}
	}
	return it, nil
}
