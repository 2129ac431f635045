package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/backoff"
	"github.com/pgimageai/pgimageai/internal/pgread"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/sink"
	"github.com/pgimageai/pgimageai/state"
)

// PageRows is how many rows a backfill reads per page, at most (pages
// are sized by bytes too, see PageBytes): each page is one short read
// transaction, so millions of rows never hold a long one. RetryRows is the
// same for the reads of a retry, which come in chunks of keys.
const (
	PageRows  = 1000
	RetryRows = 200
)

// Prefix is the prefix of the logical decoding message that places a
// backfill page in the stream.
const Prefix = "pgimageai.backfill"

// Page is one keyset page of a backfill, or the signal that it is done.
//
// A page is applied where its marker message — emitted by the worker right
// after the read — appears in the WAL. That position is after every
// transaction the read could see, so by then the engine has streamed every
// change made to those rows since the backfill started, and it skips the
// rows it streamed: the stream already handled them with a version at least
// as new as the page's (a change committed between the read and the marker
// is newer). Every later change is applied after the page. This is the
// version guard: a backfilled value never overwrites a newer streamed one.
type Page struct {
	ID          string
	Rule        string // rule name
	Run         string // the worker's run (see Worker)
	Fingerprint string // of the rule that started the backfill
	Rows        []Row
	LastKey     []byte // source_key of the last row; nil when Rows is empty
	Done        bool
	// Part is the batch whose range of rows the page is of (batch.go), 0
	// for a backfill's own pages; PartDone: the range's last page. A part's
	// last page is never Done: the backfill is done when every part is.
	Part     int
	PartDone bool
	Applied  chan struct{} // closed when the engine applied the page
	// Withdrawn: the page handed before with this ID has no marker (writing
	// it failed) and is read again; the engine lets it go.
	Withdrawn bool
}

// PageBytes bounds the image bytes one page (or one retry read) fetches,
// beside its row limit: a page stops at the row that crosses it (reads are
// bounded by bytes before they are made).
const PageBytes = 8 << 20

// Row is one source row of a page (or of a retry's read).
type Row struct {
	Key     []any
	KeyJSON []byte
	Img     []byte
	Valid   bool   // false: NULL image
	Size    int    // the image's length, also when it was not fetched
	Over    bool   // larger than max_image_bytes: its bytes were not fetched
	Head    []byte // its first 16 bytes, when over (a fetched image has its own)
	Prompt  string // the rule's prompt, rendered for the row
	// Unstored: the rule has no stored input for the row (read with the
	// page), so there is nothing to compare before the call.
	Unstored bool
	Ord      int64 // its key's ordinal in a retry's list

	// Answer is a batch API's answer for the row (batch.go); nil: none.
	Answer *state.BatchAnswer
}

// Query selects rule's source rows: key columns, the image (only when
// within max_image_bytes), its length and head, and the template's columns.
type Query struct {
	sql  string
	keys int
	cut  bool // the last column is the number of rows before the byte cut
	ord  bool // after the template's columns: the row's ordinal
}

// rowColumns returns the select list of a row query over source alias s:
// the key columns as k0…, the image as img (NULL when over max), its length
// n and head (NULL unless over max), the template's columns as t0…; and the
// key aliases.
func rowColumns(r *rules.Rule) (cols string, keys []string) {
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
		for i, c := range r.Template.Columns() {
			sc, _ := r.Source.Column(c)
			parts = append(parts, fmt.Sprintf("%s AS t%d", rules.PromptValueSQL("s."+pgx.Identifier{c}.Sanitize(), sc.TypeOID, r.Fn.MaxPromptBytes()), i))
		}
	}
	return strings.Join(parts, ", "), keys
}

// templateColumns is how many columns r's prompt names.
func templateColumns(r *rules.Rule) int {
	if r.Template == nil {
		return 0
	}
	return len(r.Template.Columns())
}

// sourceKeys returns r's key columns, quoted and prefixed with alias.
func sourceKeys(r *rules.Rule, alias string) string {
	var keys []string
	for _, k := range r.KeyColumns {
		keys = append(keys, alias+pgx.Identifier{k.Name}.Sanitize())
	}
	return strings.Join(keys, ", ")
}

// fetched is what a row counts against PageBytes: its image bytes when they
// are fetched.
func fetched(r *rules.Rule) string {
	return fmt.Sprintf("CASE WHEN p.n <= %d THEN p.n ELSE 0 END", r.Fn.MaxImageBytes())
}

// backfillSQL returns the keyset page query of r: rows after the key given
// as source_key JSON ($2; none for the first page) up to the stop key ($1),
// in key order, at most PageRows rows and — beyond the first row —
// PageBytes of images. Its last column is how many rows the row limit
// alone would give, so that a page cut by bytes is not taken for the last.
// jsonb_populate_record turns that JSON back into the key's own types.
//
// The first page has a query of its own: a lower bound that may be NULL
// ("$2 IS NULL OR key > $2") is no index condition in a generic plan, and
// every page would then scan the index from its start.
func PageSQL(r *rules.Rule, first bool) Query {
	cols, keys := rowColumns(r)
	table := r.Source.Identifier().Sanitize()
	src := sourceKeys(r, "s.")
	kk := sourceKeys(r, "k.")
	order := strings.Join(keys, ", ")
	after := fmt.Sprintf("AND (%[1]s) > (SELECT %[2]s FROM pg_catalog.jsonb_populate_record(NULL::%[3]s, $2::jsonb) AS k)", src, kk, table)
	if first {
		after = ""
	}
	return Query{keys: len(r.KeyColumns), cut: true, sql: fmt.Sprintf(`SELECT q.* FROM (
  SELECT p.*, sum(%[7]s) OVER (ORDER BY %[6]s ROWS UNBOUNDED PRECEDING) - %[7]s AS before, count(*) OVER () AS total
  FROM (SELECT %[1]s FROM %[2]s AS s
    WHERE (%[3]s) <= (SELECT %[4]s FROM pg_catalog.jsonb_populate_record(NULL::%[2]s, $1::jsonb) AS k) %[9]s
    ORDER BY %[3]s LIMIT %[5]d) AS p
) AS q WHERE q.before < %[8]d ORDER BY %[6]s`, cols, table, src, kk, PageRows, order, fetched(r), PageBytes, after)}
}

// byKeysSQL returns the query of r's source rows whose keys are in the JSON
// array $1 of source_key objects, after its ordinal $2 (from 1), in the
// array's order, each with its ordinal: at most RetryRows rows and —
// beyond the first row — PageBytes of images.
func ByKeysSQL(r *rules.Rule) Query {
	cols, _ := rowColumns(r)
	table := r.Source.Identifier().Sanitize()
	return Query{keys: len(r.KeyColumns), cut: true, ord: true, sql: fmt.Sprintf(`SELECT q.* FROM (
  SELECT p.*, sum(%[6]s) OVER (ORDER BY p.ord ROWS UNBOUNDED PRECEDING) - %[6]s AS before, count(*) OVER () AS total
  FROM (SELECT %[1]s, j.ord FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS j(key, ord)
    CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%[2]s, j.key) AS k
    JOIN %[2]s AS s ON (%[3]s) = (%[4]s)
    WHERE j.ord > $2 ORDER BY j.ord LIMIT %[5]d) AS p
) AS q WHERE q.before < %[7]d ORDER BY q.ord`, cols, table, sourceKeys(r, "s."), sourceKeys(r, "k."), RetryRows, fetched(r), PageBytes)}
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
func ReadRows(ctx context.Context, conn *pgx.Conn, r *rules.Rule, q Query, args ...any) ([]Row, error) {
	rows, _, err := ReadPage(ctx, conn, r, q, args...)
	return rows, err
}

// readPage is readRows that also returns, for a query cut by bytes, how many
// rows the row limit alone would have given.
func ReadPage(ctx context.Context, conn *pgx.Conn, r *rules.Rule, q Query, args ...any) (out []Row, total int, err error) {
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
		pr := Row{Key: vals[:q.keys]}
		if n, ok := vals[q.keys+1].(int32); ok { // octet_length: NULL for a NULL image
			pr.Valid, pr.Size, pr.Over = true, int(n), int64(n) > r.Fn.MaxImageBytes()
			pr.Head, _ = vals[q.keys+2].([]byte)
			if !pr.Over {
				if pr.Img, _ = vals[q.keys].([]byte); pr.Img == nil {
					pr.Img = []byte{}
				}
			}
		}
		pr.Prompt = r.Prompt
		if r.Template != nil {
			named := map[string]string{}
			for i, name := range r.Template.Columns() {
				c, _ := r.Source.Column(name)
				if named[name], err = rules.TextOf(typeMap, c.TypeOID, vals[q.keys+3+i]); err != nil {
					return nil, 0, err
				}
			}
			pr.Prompt = r.Template.Render(named)
		}
		if pr.KeyJSON, err = sink.KeyJSON(typeMap, r.KeyColumns, pr.Key); err != nil {
			return nil, 0, err
		}
		if q.ord {
			pr.Ord, _ = vals[q.keys+3+templateColumns(r)].(int64)
		}
		if q.cut {
			n, _ := vals[len(vals)-1].(int64)
			total = int(n)
		}
		out = append(out, pr)
	}
	return out, total, rows.Err()
}

// lastRowSQL selects the row of r's source table with the greatest key.
func LastRowSQL(r *rules.Rule) Query {
	cols, _ := rowColumns(r)
	var keys []string
	for _, k := range r.KeyColumns {
		keys = append(keys, pgx.Identifier{k.Name}.Sanitize())
	}
	return Query{keys: len(r.KeyColumns), sql: fmt.Sprintf("SELECT %s FROM %s AS s ORDER BY %s LIMIT 1",
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

// Source is what a backfill worker needs of the source database: read
// a page of r's rows after last (nil: from the start) up to stop, and place a
// page's marker in the WAL. Pages implements it on a connection of its
// own; tests use a fake.
type Source interface {
	read(ctx context.Context, r *rules.Rule, last, stop []byte) (rows []Row, total int, err error)
	mark(ctx context.Context, id string) error
	close(ctx context.Context)
}

// Worker reads a rule's source rows in keyset pages and hands each
// to the engine, which applies it where its marker appears in the WAL. It
// takes its side effects through src and hand, so its logic is tested with
// a fake source and no database.
type Worker struct {
	log  *slog.Logger
	src  Source
	hand func(ctx context.Context, p *Page) error // to the engine's goroutine; waits for it
	bo   backoff.Backoff
	// run names the worker's pages: a secret nonce (any role may emit a
	// logical decoding message with the marker's prefix, but none can name
	// a page the bridge read), new for every start of a
	// backfill, so a page of a stopped worker is never applied to the next.
	run string
	// part is the batch whose range the worker reads (see Page.Part); 0:
	// the whole backfill.
	part int
}

// readAhead is how many pages a backfill worker reads ahead: pages
// handed to the engine and marked whose marker has not come through the
// WAL yet. The next page is read while the engine applies the last one and
// its calls run, so neither the calls nor the read wait for the other; the
// pages held are at most readAhead × PageBytes of images.
const readAhead = 2

// NewWorker returns a worker of run (a secret nonce, new for every start of
// a backfill) reading through src and handing pages over with hand.
func NewWorker(log *slog.Logger, src Source, hand func(ctx context.Context, p *Page) error, run string) *Worker {
	return &Worker{log: log, src: src, hand: hand, run: run, bo: backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}}
}

// forPart returns a worker of w's run that reads batch part's range through
// src, beside other such workers: its pages are named apart.
func (w *Worker) forPart(part int, src Source) *Worker {
	return &Worker{log: w.log, src: src, hand: w.hand, run: w.run, bo: w.bo, part: part}
}

// Work reads r's pages from after last up to stop, each handed over and
// marked, with at most readAhead of them not yet applied by the engine,
// so the byte budget, which the engine waits on while it applies a page,
// paces the backfill too. Failures are retried with backoff until ctx ends.
func (w *Worker) Work(ctx context.Context, r *rules.Rule, last, stop []byte) {
	defer w.src.close(context.WithoutCancel(ctx))
	run := w.run
	seq := 0
	var ahead []*Page // handed and marked, in order; not yet applied
	// settle waits until at most n pages are not applied.
	settle := func(n int) bool {
		for len(ahead) > n {
			select {
			case <-ahead[0].Applied:
				ahead = ahead[1:]
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	for ctx.Err() == nil {
		if !settle(readAhead - 1) {
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
		end := total < PageRows && len(rows) == total
		id := fmt.Sprintf("%s/%s/%d", r.Name, run, seq)
		if w.part > 0 {
			id = fmt.Sprintf("%s/%s/b%d.%d", r.Name, run, w.part, seq)
		}
		p := &Page{ID: id, Rule: r.Name, Run: run, Fingerprint: r.Fingerprint, Rows: rows,
			Done: end && w.part == 0, Part: w.part, PartDone: end && w.part > 0, Applied: make(chan struct{})}
		if len(rows) > 0 {
			p.LastKey = rows[len(rows)-1].KeyJSON
		}
		if err := w.hand(ctx, p); err != nil {
			return
		}
		if err := w.src.mark(ctx, p.ID); err != nil {
			// The engine holds the page until its marker comes, which may
			// be never: it lets it go, and its rows are read again. (A
			// marker written after all finds no page, and is ignored.)
			if w.hand(ctx, &Page{ID: p.ID, Rule: p.Rule, Run: p.Run, Withdrawn: true}) != nil {
				return
			}
			if ctx.Err() == nil {
				// The page is never applied; the rows after the last
				// marked page are read again.
				w.log.Warn("backfill: marker failed; reading the page again", "rule", r.Name, "err", err)
				_ = w.bo.Sleep(ctx) // the loop ends with ctx
			}
			continue
		}
		ahead = append(ahead, p)
		if p.LastKey != nil {
			last = p.LastKey
		}
		if end {
			settle(0)
			return
		}
	}
}

// Pages is the Source of a backfill: one connection to the source, made
// again after a failure; each page is one short read transaction. A
// connection to the target reads which of a page's rows have a stored input
// (pgimageai.results), in one query: the others are called without a
// comparison.
type Pages struct {
	conn, target *reconn.Conn
}

// NewPages returns the Pages of a backfill of sourceDSN; targetDSN "" reads
// no stored inputs.
func NewPages(sourceDSN, targetDSN string) *Pages {
	s := &Pages{conn: reconn.New("source", sourceDSN, pgread.Buffer)} // a page is many rows of image bytes
	if targetDSN != "" {
		s.target = reconn.New("target", targetDSN, nil)
	}
	return s
}

func (s *Pages) read(ctx context.Context, r *rules.Rule, last, stop []byte) ([]Row, int, error) {
	conn, err := s.conn.Get(ctx)
	if err != nil {
		return nil, 0, err
	}
	args := []any{string(stop)}
	if last != nil {
		args = append(args, string(last))
	}
	rows, total, err := ReadPage(ctx, conn, r, PageSQL(r, last == nil), args...)
	if err != nil {
		s.conn.Drop(ctx) // a fresh session next time
		return nil, 0, err
	}
	s.unstored(ctx, r, rows)
	return rows, total, nil
}

// unstored marks the rows that r has no stored input for. On a failure it
// marks none: each row is compared on its own, as before.
func (s *Pages) unstored(ctx context.Context, r *rules.Rule, rows []Row) {
	if s.target == nil || len(rows) == 0 {
		return
	}
	keys := make([]string, len(rows))
	for i, row := range rows {
		keys[i] = string(row.KeyJSON)
	}
	var stored [][]byte
	if s.target.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		stored, err = state.StoredInputs(ctx, conn, r.Name, keys)
		return err
	}) != nil {
		return
	}
	for i := range rows {
		rows[i].Unstored = stored[i] == nil
	}
}

func (s *Pages) mark(ctx context.Context, id string) error {
	marker, _ := json.Marshal(map[string]string{"page": id})
	return s.conn.Do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", Prefix, string(marker))
		return err
	})
}

func (s *Pages) close(ctx context.Context) {
	s.conn.Drop(ctx)
	if s.target != nil {
		s.target.Drop(ctx)
	}
}
