package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// backfillPage is how many rows a backfill reads per page: each page is one
// short read transaction, so millions of rows never hold a long one.
const backfillPage = 200

// backfillPrefix is the prefix of the logical decoding message that places a
// backfill page in the stream.
const backfillPrefix = "pgimageai.backfill"

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
	fingerprint string // of the rule that started the backfill
	rows        []pageRow
	lastKey     []byte // source_key of the last row; nil when rows is empty
	done        bool
	applied     chan struct{} // closed when the engine applied the page
}

type pageRow struct {
	key     []any
	keyJSON []byte
	img     []byte
	valid   bool   // false: NULL image
	prompt  string // the rule's prompt, rendered for the row
}

// rowQuery selects rule's source rows: key columns and the image.
type rowQuery struct {
	sql  string
	keys int
}

// backfillSQL returns the keyset page query of r: rows after the key given
// as source_key JSON ($1, NULL for the first page) up to the stop key ($2),
// in key order.
// jsonb_populate_record turns that JSON back into the key's own types.
func backfillSQL(r *Rule) rowQuery {
	cols, keys := selectList(r)
	table := r.Source.Identifier().Sanitize()
	return rowQuery{keys: len(r.KeyColumns), sql: fmt.Sprintf(`SELECT %s FROM %s AS s
WHERE ($1::jsonb IS NULL OR (%[3]s) > (SELECT %[4]s FROM jsonb_populate_record(NULL::%[2]s, $1::jsonb) AS k))
  AND (%[3]s) <= (SELECT %[4]s FROM jsonb_populate_record(NULL::%[2]s, $2::jsonb) AS k)
ORDER BY %[3]s LIMIT %[5]d`, cols, table, prefixed("s.", keys), prefixed("k.", keys), backfillPage)}
}

// byKeysSQL returns the query of r's source rows whose keys are in the JSON
// array $1 of source_key objects.
func byKeysSQL(r *Rule) rowQuery {
	cols, keys := selectList(r)
	table := r.Source.Identifier().Sanitize()
	return rowQuery{keys: len(r.KeyColumns), sql: fmt.Sprintf(`SELECT %s FROM %s AS s
WHERE (%s) IN (SELECT %s FROM jsonb_populate_recordset(NULL::%s, $1::jsonb) AS k)`,
		cols, table, prefixed("s.", keys), prefixed("k.", keys), table)}
}

// selectList returns the columns a row query reads: the key, the image and
// the columns the prompt names.
func selectList(r *Rule) (cols string, keys []string) {
	for _, k := range r.KeyColumns {
		keys = append(keys, pgx.Identifier{k.Name}.Sanitize())
	}
	cols = prefixed("s.", keys) + ", s." + pgx.Identifier{r.ImageColumn}.Sanitize()
	if r.Template != nil {
		var named []string
		for _, c := range r.Template.columns {
			named = append(named, pgx.Identifier{c}.Sanitize())
		}
		cols += ", " + prefixed("s.", named)
	}
	return cols, keys
}

func prefixed(p string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return strings.Join(out, ", ")
}

// readRows runs q and returns its rows as page rows.
func (e *engine) readRows(ctx context.Context, conn *pgx.Conn, r *Rule, q rowQuery, args ...any) ([]pageRow, error) {
	rows, err := conn.Query(ctx, q.sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pageRow
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		pr := pageRow{key: vals[:q.keys]}
		if img, ok := vals[q.keys].([]byte); ok {
			pr.img, pr.valid = img, true
		}
		pr.prompt = r.Prompt
		if r.Template != nil {
			named := map[string]string{}
			for i, name := range r.Template.columns {
				c, _ := r.Source.Column(name)
				if named[name], err = textOf(e.typeMap, c.TypeOID, vals[q.keys+1+i]); err != nil {
					return nil, err
				}
			}
			pr.prompt = r.Template.render(named)
		}
		if pr.keyJSON, err = sink.KeyJSON(e.typeMap, r.KeyColumns, pr.key); err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, rows.Err()
}

// startBackfill starts or resumes the backfill of r, unless it is done for
// what r computes (its fingerprint).
func (e *engine) startBackfill(ctx context.Context, r *Rule) error {
	if err := e.live.reconnect(ctx); err != nil {
		return err
	}
	var state, fingerprint string
	var last, stop []byte
	err := e.live.tgt.QueryRow(ctx, "SELECT state, fingerprint, last_key::text, stop_key::text FROM pgimageai.backfills WHERE rule = $1", r.Name).Scan(&state, &fingerprint, &last, &stop)
	switch {
	case err == nil && fingerprint == r.Fingerprint && state == "done":
		return nil
	case err == nil && fingerprint == r.Fingerprint:
		e.log.Info("backfill resumed", "rule", r.Name, "after", string(last))
	case err == nil || errors.Is(err, pgx.ErrNoRows):
		// Rows beyond the greatest key of now are new: the stream has them.
		last = nil
		rows, err := e.readRows(ctx, e.live.src, r, lastRowSQL(r))
		if err != nil {
			return fmt.Errorf("start backfill of %s: %w", r.Name, err)
		}
		state = "running"
		if stop = nil; len(rows) == 1 {
			stop = rows[0].keyJSON
		} else {
			state = "done" // an empty table: nothing to do
		}
		_, err = e.live.tgt.Exec(ctx, `INSERT INTO pgimageai.backfills (rule, state, fingerprint, stop_key, rows_total, finished_at)
VALUES ($1, $2, $3, $4, (SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint END FROM pg_class WHERE oid = $5), CASE WHEN $2 = 'done' THEN now() END)
ON CONFLICT (rule) DO UPDATE SET state = EXCLUDED.state, fingerprint = EXCLUDED.fingerprint, last_key = NULL,
  stop_key = EXCLUDED.stop_key, rows_done = 0, rows_total = EXCLUDED.rows_total, started_at = now(), updated_at = now(),
  finished_at = EXCLUDED.finished_at`, r.Name, state, r.Fingerprint, nullable(stop), r.Source.OID)
		if err != nil {
			return fmt.Errorf("start backfill of %s: %w", r.Name, err)
		}
		if state == "done" {
			e.log.Info("backfill done", "rule", r.Name, "rows", 0)
			return nil
		}
		e.log.Info("backfill started", "rule", r.Name, "source", r.Source.String(), "up_to", string(stop))
	default:
		return fmt.Errorf("backfill state of %s: %w", r.Name, err)
	}
	if e.seen[r.Source.OID] == nil {
		e.seen[r.Source.OID] = map[keyDigest]bool{}
	}
	e.stopBackfill(r.Name) // one worker per rule, also after a reload that failed half-way
	bctx, cancel := context.WithCancel(e.callCtx)
	e.backfills[r.Name] = cancel
	go e.backfillWorker(bctx, r, last, stop)
	return nil
}

// lastRowSQL selects the row of r's source table with the greatest key.
func lastRowSQL(r *Rule) rowQuery {
	cols, keys := selectList(r)
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

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// stopBackfill stops the backfill worker of a rule, if one runs.
func (e *engine) stopBackfill(name string) {
	if cancel, ok := e.backfills[name]; ok {
		cancel()
		delete(e.backfills, name)
	}
}

// backfillWorker reads r's source rows in keyset pages, each in a short
// transaction of its own connection, and hands them to the engine, which
// treats a page like a transaction. Handing over waits for the engine, so the
// byte budget paces the backfill too. Errors are retried with backoff.
func (e *engine) backfillWorker(ctx context.Context, r *Rule, last, stop []byte) {
	q := backfillSQL(r)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	wait := 200 * time.Millisecond
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	seq := 0
	for ctx.Err() == nil {
		if conn == nil || conn.IsClosed() {
			c, err := pgx.Connect(ctx, e.srcDSN)
			if err != nil {
				e.log.Warn("backfill: connect failed; retrying", "rule", r.Name, "err", err)
				sleep(ctx, &wait)
				continue
			}
			conn = c
		}
		rows, err := e.readRows(ctx, conn, r, q, nullable(last), string(stop))
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("backfill: page failed; retrying", "rule", r.Name, "err", err)
				sleep(ctx, &wait)
			}
			continue
		}
		wait = 200 * time.Millisecond
		seq++
		p := &page{id: fmt.Sprintf("%s/%s/%d", r.Name, run, seq), rule: r.Name, fingerprint: r.Fingerprint,
			rows: rows, done: len(rows) < backfillPage, applied: make(chan struct{})}
		if len(rows) > 0 {
			p.lastKey = rows[len(rows)-1].keyJSON
		}
		select {
		case e.pages <- p:
		case <-ctx.Done():
			return
		}
		marker, _ := json.Marshal(map[string]string{"page": p.id})
		if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", backfillPrefix, string(marker)); err != nil {
			if ctx.Err() == nil {
				e.log.Warn("backfill: marker failed; reading the page again", "rule", r.Name, "err", err)
				sleep(ctx, &wait)
			}
			continue
		}
		select {
		case <-p.applied:
		case <-ctx.Done():
			return
		}
		if p.lastKey != nil {
			last = p.lastKey
		}
		if p.done {
			return
		}
	}
}

func sleep(ctx context.Context, wait *time.Duration) {
	select {
	case <-time.After(*wait):
	case <-ctx.Done():
	}
	*wait = min(*wait*2, 10*time.Second)
}

// register keeps a page read by a worker until its marker message arrives.
func (e *engine) register(p *page) { e.pending[p.id] = p }

// page applies the backfill page whose marker message m is, inside m's
// transaction: the rows as if inserted — except those whose version the
// engine streamed itself — and the progress.
func (e *engine) page(ctx context.Context, m *replication.Message) error {
	var marker struct{ Page string }
	if json.Unmarshal(m.Content, &marker) != nil {
		return nil
	}
	p := e.pending[marker.Page]
	if p == nil {
		return nil // a page of an earlier run or of a stopped backfill
	}
	delete(e.pending, marker.Page)
	defer close(p.applied)
	r := e.live.valid[p.rule]
	if r == nil || r.Fingerprint != p.fingerprint {
		return nil // the rule changed or went away; its new backfill covers it
	}
	seen := e.seen[r.Source.OID]
	for _, row := range p.rows {
		if seen[digestKey(row.keyJSON)] {
			continue
		}
		it, err := e.resultItem(ctx, r, row)
		if err != nil {
			return err
		}
		it.lsn = m.LSN
		e.open.items = append(e.open.items, it)
	}
	e.open.items = append(e.open.items, item{kind: itemBackfill, progress: sink.BackfillProgress{
		Rule: r.Name, Fingerprint: r.Fingerprint, LastKey: p.lastKey, Rows: len(p.rows), Done: p.done}})
	e.backfilled[r.Name] += len(p.rows)
	if n := e.backfilled[r.Name]; !p.done && n/backfillPage%25 == 0 {
		e.log.Info("backfill progress", "rule", r.Name, "rows", n, "last_key", string(p.lastKey))
	}
	if p.done {
		e.log.Info("backfill done", "rule", r.Name, "rows", e.backfilled[r.Name])
		delete(e.backfilled, r.Name)
		e.stopBackfill(r.Name)
		if !e.backfilling(r.Source.OID) {
			delete(e.seen, r.Source.OID)
		}
	}
	return nil
}

// backfilling reports whether a backfill of some rule on table oid runs.
func (e *engine) backfilling(oid uint32) bool {
	for name := range e.backfills {
		if r := e.live.valid[name]; r != nil && r.Source.OID == oid {
			return true
		}
	}
	return false
}

// resultItem starts the function call of a row read from the source.
func (e *engine) resultItem(ctx context.Context, r *Rule, row pageRow) (item, error) {
	it := item{kind: itemResult, rule: r, target: r.Target, sourceTable: r.Source.String(), key: row.key, keyJSON: row.keyJSON}
	if r.Template != nil {
		e.memo.set(r.Name, row.keyJSON, row.prompt)
	}
	if row.valid {
		var err error
		if it.call, err = e.start(ctx, r, row.img, row.prompt); err != nil {
			return item{}, err
		}
	}
	return it, nil
}
