package replication

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// slotNameMax is the longest name a replication slot may have (NAMEDATALEN-1).
const slotNameMax = 63

// DefaultSlotName is the slot of a rule group on database when the operator
// names none: "pgimageai_" and the database's name (and the group's, for a
// group other than defaultGroup), made of the characters a slot name may
// hold, then a hash of the exact names. Slots are the server's, not a
// database's: the hash keeps two databases — or a database and a group whose
// names read alike once lower-cased ("Shop" and "shop", "a_b" and group "b"
// of "a") — from ever sharing a slot. The name is at most 63 bytes.
func DefaultSlotName(database, group, defaultGroup string) string {
	readable := sanitizeSlotPart(database)
	exact := database
	if group != defaultGroup {
		readable += "_" + sanitizeSlotPart(group)
		exact += "\x00" + group
	}
	h := fnv.New32a()
	h.Write([]byte(exact))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	room := slotNameMax - len("pgimageai_") - len(suffix)
	if len(readable) > room {
		readable = readable[:room]
	}
	return "pgimageai_" + strings.Trim(readable, "_") + suffix
}

// LegacySlotName is the default slot name of a rule group before slot names
// carried the database: "pgimageai", or "pgimageai_GROUP". A bridge that
// streams such a slot keeps it (ResolveSlotName).
func LegacySlotName(group, defaultGroup string) string {
	if group == defaultGroup {
		return "pgimageai"
	}
	return "pgimageai_" + group
}

func sanitizeSlotPart(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ResolveSlotName returns the slot a rule group uses when the operator named
// none: the legacy name when a slot of that name exists in conn's database
// (an installation from before slot names carried the database keeps its slot,
// its position and its checkpoint: nothing is streamed again, nothing lost),
// or when inUse says the legacy name is still in use (its checkpoint is
// stored, e.g. while a dropped slot waits for recovery); DefaultSlotName
// otherwise.
func ResolveSlotName(ctx context.Context, conn *pgx.Conn, group, defaultGroup string, inUse func(slot string) (bool, error)) (string, error) {
	legacy := LegacySlotName(group, defaultGroup)
	var db string
	var here bool
	err := conn.QueryRow(ctx, `SELECT current_database(),
  EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = $1 AND database = current_database())`, legacy).Scan(&db, &here)
	if err != nil {
		return "", fmt.Errorf("read the slots of the database: %w", err)
	}
	if here {
		return legacy, nil
	}
	if inUse != nil {
		used, err := inUse(legacy)
		if err != nil {
			return "", err
		}
		if used {
			return legacy, nil
		}
	}
	return DefaultSlotName(db, group, defaultGroup), nil
}
