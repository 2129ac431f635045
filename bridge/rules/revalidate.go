package rules

import (
	"context"
	"errors"
	"sort"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

// Revalidate reads the replica identity of the valid rules' source tables
// and whether the publication still publishes them. When an identity
// differs from the one its rules were compiled with, it syncs the
// publication at once — without the tables whose identity no longer carries
// a key (published, their UPDATEs and DELETEs fail, SQLSTATE 55000), with
// the new identity's columns in the others' column lists (without them
// they fail too, SQLSTATE 42P10) — and returns those tables: their rules
// must be compiled again (and reported when they no longer fit), which the
// engine does between transactions. A table taken out of the publication by
// someone else (DROP COLUMN ... CASCADE of a published column) is put back.
//
// It is cheap (three small catalog queries) so that it can run every few seconds:
// that interval is how long an application's writes can fail after its
// DDL made a published table's identity unusable.
func (l *Live) Revalidate(ctx context.Context) (changed []string, err error) {
	if len(l.valid) == 0 {
		return nil, nil
	}
	src, err := l.conns.Src.Get(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(l.valid))
	for name := range l.valid {
		names = append(names, name)
	}
	sort.Strings(names)
	var oids []uint32
	compiled := map[uint32]*catalog.Table{}
	for _, name := range names {
		t := l.valid[name].Source
		if _, ok := compiled[t.OID]; !ok {
			compiled[t.OID] = t
			oids = append(oids, t.OID)
		}
	}
	ids, err := catalog.Identities(ctx, src, oids)
	if err != nil {
		return nil, err
	}
	unusable := map[uint32]bool{}
	for _, oid := range oids {
		id, ok := ids[oid]
		if !ok || id.Equal(compiled[oid].Identity) {
			continue // a dropped table leaves the publication by itself
		}
		changed = append(changed, compiled[oid].String())
		if id.Problem(compiled[oid]) != "" || !id.Usable {
			unusable[oid] = true
		}
		l.log.Warn("the replica identity of a followed table changed; its rules are checked again", "table", compiled[oid].String(),
			"was", compiled[oid].Identity.Kind.String(), "now", id.Kind.String(), "usable", !unusable[oid])
	}
	missing := false
	if len(changed) == 0 {
		published, found, err := replication.PublishedTables(ctx, src, l.pub)
		if err != nil {
			return nil, err
		}
		for _, oid := range oids {
			if found && !published[oid] {
				missing = true
				l.log.Warn("a followed table was taken out of the publication; putting it back (its changes meanwhile were not streamed)", "table", compiled[oid].String())
			}
		}
	}
	if len(changed) == 0 && !missing {
		return nil, nil
	}
	var keep []*Rule
	for _, name := range names {
		if r := l.valid[name]; !unusable[r.Source.OID] {
			keep = append(keep, r)
		}
	}
	err = replication.SyncPublicationTables(ctx, src, l.pub, Publication(keep, l.readColumns))
	if errors.Is(err, replication.ErrPrivilege) {
		// The reload that follows reports the rules; the owner must act.
		l.log.Error("this role may not change the publication: a table whose replica identity no longer carries a key stays published, and the application's UPDATEs and DELETEs on it fail until its owner takes it out or fixes its identity",
			"publication", l.pub, "tables", changed, "err", err)
		return changed, nil
	}
	return changed, err
}
