package rules

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/replication"
)

// Relation is where a *replication.Relation holds the key and image columns
// of the rules of its table (a Relation is immutable, so this is computed
// once per Relation).
type Relation struct {
	Key   []int          // indexes of the primary key columns
	Image map[string]int // image column name → index
	// Retyped is true when a key column's type (or its modifier) is not
	// the one the rules were compiled with: the source's key was altered,
	// and the rules must be compiled again before a key of the new type
	// reaches a target (which then follows a widening; see sink.Ensure).
	Retyped bool
}

// Fit returns where r holds the key and image columns of rules, and why
// rules do not fit it, by rule name: a rule whose image column was renamed,
// dropped or is no longer bytea, or whose table's primary key changed, no
// longer fits the table as the WAL shows it. A key column whose type changed
// still fits (Relation.Retyped).
func Fit(r *replication.Relation, rules []*Rule) (*Relation, map[string]string) {
	rel := &Relation{Image: map[string]int{}}
	misfits := map[string]string{}
	table := pgx.Identifier{r.Namespace, r.Name}.Sanitize()
	var keyErr string
	for _, k := range rules[0].Source.PrimaryKey {
		i := r.ColumnIndex(k)
		if i < 0 {
			keyErr = fmt.Sprintf("table %s: primary key column %q is gone", table, k)
			break
		}
		rel.Key = append(rel.Key, i)
		if c, ok := rules[0].Source.Column(k); ok && (c.TypeOID != r.Columns[i].TypeOID || c.TypeMod != r.Columns[i].TypeModifier) {
			rel.Retyped = true
		}
	}
	if keyErr == "" && r.ReplicaIdentity == 'd' {
		n := 0
		for _, c := range r.Columns {
			if c.Key {
				n++
			}
		}
		for _, i := range rel.Key {
			if !r.Columns[i].Key {
				n = -1
			}
		}
		if n != len(rel.Key) {
			keyErr = fmt.Sprintf("table %s: its primary key is no longer (%s); the rule must be loaded again", table, strings.Join(rules[0].Source.PrimaryKey, ", "))
		}
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
		case r.Columns[i].TypeOID != ByteaOID:
			misfits[rule.Name] = fmt.Sprintf("image column %q of table %s is no longer bytea (type OID %d)", rule.ImageColumn, table, r.Columns[i].TypeOID)
		default:
			rel.Image[rule.ImageColumn] = i
		}
	}
	return rel, misfits
}
