package rules

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

// Relation is where a *replication.Relation holds the key and image columns
// of the rules of its table (a Relation is immutable, so this is computed
// once per Relation).
type Relation struct {
	Key   []int          // indexes of the key columns (the replica identity's)
	Image map[string]int // image column name → index
	// Retyped is true when a key column's type (or its modifier) is not
	// the one the rules were compiled with: the source's key was altered,
	// and the rules must be compiled again before a key of the new type
	// reaches a target (which then follows a widening; see sink.Ensure).
	Retyped bool
}

// Fit returns where r holds the key and image columns of rules, and why
// rules do not fit it, by rule name: a rule whose image column was renamed,
// dropped or is no longer bytea, or whose table's key (its replica identity:
// primary key, USING INDEX index) changed or no longer carries a key, no
// longer fits the table as the WAL shows it. A key column whose type changed
// still fits (Relation.Retyped).
func Fit(r *replication.Relation, rules []*Rule) (*Relation, map[string]string) {
	rel := &Relation{Image: map[string]int{}}
	misfits := map[string]string{}
	table := pgx.Identifier{r.Namespace, r.Name}.Sanitize()
	source := rules[0].Source
	key := source.Key()
	var keyErr string
	for _, k := range key {
		i := r.ColumnIndex(k)
		if i < 0 {
			keyErr = fmt.Sprintf("table %s: key column %q is gone", table, k)
			break
		}
		rel.Key = append(rel.Key, i)
		if c, ok := source.Column(k); ok && (c.TypeOID != r.Columns[i].TypeOID || c.TypeMod != r.Columns[i].TypeModifier) {
			rel.Retyped = true
		}
	}
	if keyErr == "" {
		keyErr = identityChanged(r, table, source.Identity, rel.Key)
	}
	for _, rule := range rules {
		if keyErr != "" {
			misfits[rule.Name] = keyErr
			continue
		}
		i := r.ColumnIndex(rule.ImageColumn)
		switch {
		case i < 0:
			misfits[rule.Name] = fmt.Sprintf("table %s no longer has image column %q", table, rule.ImageColumn)
		case !isBytea(source, rule.ImageColumn, r.Columns[i].TypeOID):
			misfits[rule.Name] = fmt.Sprintf("image column %q of table %s is no longer bytea (type OID %d)", rule.ImageColumn, table, r.Columns[i].TypeOID)
		default:
			rel.Image[rule.ImageColumn] = i
		}
	}
	return rel, misfits
}

// isBytea reports whether a column of type oid, as the WAL shows it, is
// still the bytea (or domain over bytea) that the rules were compiled with.
func isBytea(source *catalog.Table, column string, oid uint32) bool {
	if oid == ByteaOID {
		return true
	}
	c, ok := source.Column(column)
	return ok && c.TypeOID == oid && c.Underlying == ByteaOID
}

// identityChanged says how r's replica identity no longer carries the key
// of id, the identity the rules were compiled with, whose key columns r
// holds at key; "" when it still does. pgoutput marks the identity's
// columns as key columns (all of them under FULL) and sends the old row's
// key by them, so the key still fits when the marked columns are the key's,
// or under FULL (the old row holds them all): a change between DEFAULT and
// FULL of a table with a primary key keeps its rules running.
func identityChanged(r *replication.Relation, table string, id catalog.Identity, key []int) string {
	now := catalog.ReplicaIdentity(r.ReplicaIdentity)
	switch now {
	case catalog.IdentityFull:
		return ""
	case catalog.IdentityNothing:
		return fmt.Sprintf("table %s: its replica identity changed from %s to NOTHING, which carries no key; the rule must be loaded again", table, id.Kind)
	}
	n := 0
	for _, c := range r.Columns {
		if c.Key {
			n++
		}
	}
	for _, i := range key {
		if !r.Columns[i].Key {
			n = -1
		}
	}
	if n != len(key) {
		return fmt.Sprintf("table %s: its key (replica identity %s) is no longer (%s); the rule must be loaded again", table, now, strings.Join(id.Key, ", "))
	}
	return ""
}
