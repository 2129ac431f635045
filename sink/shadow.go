package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

// The SQL side of a version switch (see the design of versioned results): a
// rule's new version is computed into a shadow column of the target table,
// beside the live column, with copies of the live column's indexes built
// concurrently; then ONE transaction of the table's lane drops the live
// column, renames the shadow column to the live column's name and each
// shadow index to its original's name (Switch). DropShadow undoes the side
// work. Every identifier is quoted with pgx.Identifier; the only SQL text
// taken from the catalogs is an index predicate as pg_get_expr prints it.

// Shadow column and index names.
const (
	shadowColumnMax = 40    // bytes of the live column's name kept in a shadow column's
	shadowMark      = "__v" // between the kept name and the version
	versionChars    = 8     // characters of the version in a shadow name
	identMax        = 63    // NAMEDATALEN - 1: PostgreSQL truncates longer names
)

// ShadowName returns the name of the shadow column that holds version of the
// live column's results: the live column's name truncated to at most 40
// bytes (on a UTF-8 character boundary), "__v", and the first 8 characters
// of version. It is at most 51 bytes, below PostgreSQL's 63.
func ShadowName(live, version string) string {
	if len(version) > versionChars {
		version = version[:versionChars]
	}
	return truncateUTF8(live, shadowColumnMax) + shadowMark + version
}

// truncateUTF8 returns the longest prefix of s of at most n bytes that ends
// on a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// shadowIndexSuffix is what a shadow index's name ends with: the "__v…" part
// of the shadow column's name, so that the indexes of one switch are
// recognisable; "__shadow" for a shadow column named otherwise.
func shadowIndexSuffix(shadow string) string {
	if i := strings.LastIndex(shadow, shadowMark); i >= 0 && len(shadow)-i <= len(shadowMark)+versionChars {
		return shadow[i:]
	}
	return "__shadow"
}

// shadowIndexName returns the n-th candidate name of the shadow copy of
// index original: original truncated so that the whole is at most 63 bytes,
// then "_<n>" for n > 0, then suffix.
func shadowIndexName(original, suffix string, n int) string {
	tail := suffix
	if n > 0 {
		tail = "_" + strconv.Itoa(n) + suffix
	}
	return truncateUTF8(original, identMax-len(tail)) + tail
}

// Shadow column types. A type is never pasted into SQL as given: it must be
// one of these, and a pgvector type's schema is quoted again.
var (
	vectorTypeRE = regexp.MustCompile(`^(?:("(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\.)?(vector|halfvec)\(([1-9][0-9]{0,4})\)$`)
	plainTypes   = map[string]bool{"real[]": true, "text": true, "jsonb": true, "json": true}
)

// columnType is a validated shadow column type.
type columnType struct {
	sql  string // the type as SQL, identifiers quoted
	base string // the type without its modifier, for to_regtype
	mod  int32  // its atttypmod: the dimension of a pgvector type, else -1
}

// parseShadowType validates a shadow column's type as format_type prints it:
// vector(n) or halfvec(n) (pgvector, possibly schema-qualified), real[],
// text, jsonb or json.
func parseShadowType(sqlType string) (columnType, error) {
	if plainTypes[sqlType] {
		return columnType{sql: sqlType, base: sqlType, mod: -1}, nil
	}
	m := vectorTypeRE.FindStringSubmatch(sqlType)
	if m == nil {
		return columnType{}, fmt.Errorf("shadow column type %q: want vector(n), halfvec(n), real[], text, jsonb or json", sqlType)
	}
	dim, _ := strconv.Atoi(m[3]) // at most 5 digits
	base := m[2]
	if schema := m[1]; schema != "" {
		if strings.HasPrefix(schema, `"`) {
			schema = strings.ReplaceAll(schema[1:len(schema)-1], `""`, `"`)
		}
		base = pgx.Identifier{schema}.Sanitize() + "." + base
	}
	return columnType{sql: fmt.Sprintf("%s(%d)", base, dim), base: base, mod: int32(dim)}, nil
}

// ShadowType returns the type of the shadow column of live's column for a
// new version: for a pgvector column, the same type with dim dimensions (the
// new model's, which must be known: dim > 0); for real[], text or JSON
// results the live column's own type (a text result in a varchar(n) column
// gets text). The result is what AddShadowColumn accepts.
func ShadowType(live *Target, dim int) (string, error) {
	var typ string
	switch {
	case live.Vector:
		if dim <= 0 {
			return "", fmt.Errorf("shadow column of %s.%s: the new model's dimension is unknown", live.Table, pgx.Identifier{live.Column}.Sanitize())
		}
		base, _, _ := strings.Cut(live.SQLType, "(")
		typ = fmt.Sprintf("%s(%d)", base, dim)
	case live.Type == TextResult:
		typ = "text"
	default: // real[], jsonb, json, or text for a JSON result
		typ = live.SQLType
	}
	if _, err := parseShadowType(typ); err != nil {
		return "", err
	}
	return typ, nil
}

// addColumnLockTimeout bounds AddShadowColumn's wait for its lock.
const addColumnLockTimeout = 2 * time.Second

// AddShadowColumn adds column shadow of type sqlType (see parseShadowType)
// to table, unless it exists; an existing column of another type is an
// error (drop it, e.g. with DropShadow, to start again). Adding a nullable
// column without a default changes only the catalog, but it takes the
// table's ACCESS EXCLUSIVE lock for that moment: it waits for the
// transactions using the table, and new ones wait behind it, for at most
// addColumnLockTimeout (then it fails with SQLSTATE 55P03, to be tried
// again).
func AddShadowColumn(ctx context.Context, conn *pgx.Conn, table *catalog.Table, shadow, sqlType string) error {
	typ, err := parseShadowType(sqlType)
	if err != nil {
		return err
	}
	col := pgx.Identifier{shadow}.Sanitize()
	add := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", table.Identifier().Sanitize(), col, typ.sql)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Bounded as Switch is: behind a long query on the table, the
		// column is added at a later try rather than queue readers.
		b := &pgx.Batch{}
		queueLockTimeout(b, addColumnLockTimeout)
		b.Queue(add)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("add shadow column %s to %s: %w", col, table, err)
	}
	var same bool
	var has string
	err = conn.QueryRow(ctx, `SELECT a.atttypid = to_regtype($3) AND a.atttypmod = $4, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a WHERE a.attrelid = $1 AND a.attname = $2 AND NOT a.attisdropped`,
		table.OID, shadow, typ.base, typ.mod).Scan(&same, &has)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("add shadow column %s to %s: it is not there after ALTER TABLE (was the table replaced?)", col, table)
	}
	if err != nil {
		return fmt.Errorf("shadow column %s of %s: %w", col, table, err)
	}
	if !same {
		return fmt.Errorf("shadow column %s of %s exists as %s, not %s: drop it to start the switch again", col, table, has, typ.sql)
	}
	return nil
}

// LockStartSetting is the transaction-local setting in which Switch records
// when it asked for the table's lock, and LockMillisSQL reads it.
const LockStartSetting = "pgimageai.switch_lock_start"

// LockMillisSQL is an SQL expression, for a statement of the switch
// transaction queued after Switch (the insert of its switch_history row):
// the milliseconds since Switch asked for the table's ACCESS EXCLUSIVE lock
// (its wait included). The lock is held until the transaction ends, so this
// measures up to that statement, not to the commit that follows it; NULL
// outside a transaction that ran Switch.
const LockMillisSQL = `((extract(epoch FROM clock_timestamp()) - NULLIF(current_setting('` + LockStartSetting + `', true), '')::numeric) * 1000)::float8`

// queueLockTimeout queues SET LOCAL lock_timeout = d (none when d <= 0): a
// statement of the transaction that waits longer for a lock fails with
// SQLSTATE 55P03, and the transaction with it.
func queueLockTimeout(b *pgx.Batch, d time.Duration) {
	if d <= 0 {
		return
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	b.Queue("SELECT set_config('lock_timeout', $1, true)", fmt.Sprintf("%dms", ms))
}

// Switch is the switch of a rule's live column to its shadow column, for the
// lane of the target table to queue in its own target transaction, before
// the bookkeeping of the switch (whose switch_history row may take lock_ms
// from LockMillisSQL):
//
//	SET LOCAL lock_timeout = LockTimeout (when > 0)
//	ALTER TABLE t DROP COLUMN live              -- drops the live column's indexes
//	ALTER TABLE t RENAME COLUMN shadow TO live
//	ALTER INDEX shadow_idx RENAME TO original   -- for each of Indexes
//
// The DROP COLUMN takes the table's ACCESS EXCLUSIVE lock until the
// transaction ends: readers and writers of the table wait for the commit
// (DDL on the catalog only: milliseconds), and while it waits for the
// transactions using the table, new ones wait behind it, which LockTimeout
// bounds. It relies on ShadowIndexes, BuildShadowIndexes and
// SwitchObstacles having found nothing in the way; if anything is (a view
// created since, a shadow index gone), a statement fails and the whole
// transaction with it, leaving the table as it was. The dropped column's
// values stay in the table's pages until rows are rewritten (PostgreSQL's
// DROP COLUMN), and statements prepared on the table are planned again.
type Switch struct {
	Table        pgx.Identifier
	Live, Shadow string
	Indexes      []IndexPlan
	LockTimeout  time.Duration
}

// Queue implements Op.
func (s Switch) Queue(b *pgx.Batch) {
	queueLockTimeout(b, s.LockTimeout)
	b.Queue("SELECT set_config('" + LockStartSetting + "', extract(epoch FROM clock_timestamp())::text, true)")
	table := s.Table.Sanitize()
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", table, pgx.Identifier{s.Live}.Sanitize()))
	b.Queue(fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", table, pgx.Identifier{s.Shadow}.Sanitize(), pgx.Identifier{s.Live}.Sanitize()))
	for _, p := range s.Indexes {
		b.Queue(fmt.Sprintf("ALTER INDEX %s RENAME TO %s", pgx.Identifier{p.Schema, p.Name}.Sanitize(), pgx.Identifier{p.Original}.Sanitize()))
	}
}

// DropShadow drops a shadow column and, with it, its indexes (built or
// left invalid by an interrupted build): an aborted or cancelled switch. It
// takes the table's ACCESS EXCLUSIVE lock like Switch, bounded by
// LockTimeout when > 0. A column already gone is no error.
type DropShadow struct {
	Table       pgx.Identifier
	Shadow      string
	LockTimeout time.Duration
}

// Queue implements Op.
func (d DropShadow) Queue(b *pgx.Batch) {
	queueLockTimeout(b, d.LockTimeout)
	b.Queue(fmt.Sprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s", d.Table.Sanitize(), pgx.Identifier{d.Shadow}.Sanitize()))
}
