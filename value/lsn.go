package value

import (
	"database/sql/driver"
	"fmt"
)

// LSN is a PostgreSQL log sequence number. Its text form is PostgreSQL's
// (XXX/XXX); it scans from and is sent as pg_lsn text, the way
// pglogrepl.LSN is, and converts to it as a plain uint64.
type LSN uint64

// String formats lsn the way PostgreSQL does, e.g. 16/B374D848.
func (lsn LSN) String() string {
	return fmt.Sprintf("%X/%X", uint32(lsn>>32), uint32(lsn))
}

// ParseLSN parses PostgreSQL's XXX/XXX text form of an LSN.
func ParseLSN(s string) (LSN, error) {
	var upper, lower uint64
	n, err := fmt.Sscanf(s, "%X/%X", &upper, &lower)
	if err != nil {
		return 0, fmt.Errorf("failed to parse LSN: %w", err)
	}
	if n != 2 || upper > 0xFFFFFFFF || lower > 0xFFFFFFFF {
		return 0, fmt.Errorf("failed to parse LSN: %s", s)
	}
	return LSN(upper<<32 | lower), nil
}

// Scan implements sql.Scanner: a pg_lsn as text, or a uint64.
func (lsn *LSN) Scan(src any) error {
	if lsn == nil {
		return nil
	}
	switch v := src.(type) {
	case uint64:
		*lsn = LSN(v)
	case string:
		return lsn.parse(v)
	case []byte:
		return lsn.parse(string(v))
	default:
		return fmt.Errorf("can not scan %T to LSN", src)
	}
	return nil
}

func (lsn *LSN) parse(s string) error {
	v, err := ParseLSN(s)
	if err != nil {
		return err
	}
	*lsn = v
	return nil
}

// Value implements driver.Valuer: the text form, which PostgreSQL casts to
// pg_lsn.
func (lsn LSN) Value() (driver.Value, error) { return lsn.String(), nil }

// Position is a place in the stream: the commit LSN of a source transaction
// and the ordinal of a change inside it. Positions order the changes of a
// lane, so that a lane's checkpoint can point inside a big transaction.
type Position struct {
	Commit LSN   // Begin.FinalLSN of the transaction
	Ord    int64 // change ordinal inside it
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Commit < q.Commit || (p.Commit == q.Commit && p.Ord < q.Ord)
}

// IsZero reports whether p is the zero position, before any change.
func (p Position) IsZero() bool { return p == Position{} }

func (p Position) String() string { return fmt.Sprintf("%s#%d", p.Commit, p.Ord) }
