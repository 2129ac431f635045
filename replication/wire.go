package replication

import (
	"encoding/binary"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// parse checks that data is one complete, well-formed pgoutput protocol
// version 1 message and then decodes it with pglogrepl.Parse.
//
// The check exists because pglogrepl.Parse trusts its input: it indexes past
// the end of short messages (a panic) and allocates whatever a length field
// claims (up to 4 GiB for a tuple column, 16 GiB for a TRUNCATE). After the
// check every length is known to fit in data, so Parse neither panics nor
// allocates more than len(data) per field. FuzzDecode holds us to that.
// Message layouts: https://www.postgresql.org/docs/current/protocol-logicalrep-message-formats.html
func parse(data []byte) (pglogrepl.Message, error) {
	if err := validate(data); err != nil {
		return nil, err
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return msg, nil
}

// validate walks data as a pgoutput v1 message without decoding it. The
// decoder reads Insert, Update and Delete itself (rowChange); validate's
// walk of them is the independent reference FuzzDecode holds it to.
func validate(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty message", ErrProtocol)
	}
	c := cursor{b: data[1:]}
	switch data[0] {
	case 'B': // final LSN, commit time, xid
		c.skip(20)
	case 'C': // flags, commit LSN, end LSN, commit time
		c.skip(25)
	case 'O': // origin LSN, name
		c.skip(8)
		c.cstring()
	case 'R': // OID, namespace, name, replica identity, columns
		c.skip(4)
		c.cstring()
		c.cstring()
		c.skip(1)
		for n := c.uint16(); n > 0 && c.ok(); n-- {
			c.skip(1) // flags
			c.cstring()
			c.skip(8) // type OID, type modifier
		}
	case 'Y': // type OID, namespace, name
		c.skip(4)
		c.cstring()
		c.cstring()
	case 'I':
		c.skip(4)
		c.expect('N')
		c.tuple()
	case 'U':
		c.skip(4)
		switch c.byte() {
		case 'K', 'O':
			c.tuple()
			c.expect('N')
			c.tuple()
		case 'N':
			c.tuple()
		default:
			c.fail("update tuple type")
		}
	case 'D':
		c.skip(4)
		switch c.byte() {
		case 'K', 'O':
			c.tuple()
		default:
			c.fail("delete tuple type")
		}
	case 'T': // relation count, options, relation OIDs
		n := c.uint32()
		c.skip(1)
		c.skip(4 * int(n))
	case 'M': // flags, LSN, prefix, content
		c.skip(9)
		c.cstring()
		c.skip(int(c.uint32()))
	default:
		return fmt.Errorf("%w: unexpected message type %q (streaming and two-phase are not enabled)", ErrProtocol, data[0])
	}
	if c.err != "" {
		return fmt.Errorf("%w: malformed %q message: %s", ErrProtocol, data[0], c.err)
	}
	if len(c.b) != 0 {
		return fmt.Errorf("%w: %q message has %d trailing bytes", ErrProtocol, data[0], len(c.b))
	}
	return nil
}

// cursor reads a message front to back; the first failure sticks and every
// later read is a no-op.
type cursor struct {
	b   []byte
	err string
}

func (c *cursor) ok() bool { return c.err == "" }

func (c *cursor) fail(what string) {
	if c.err == "" {
		c.err = what
		c.b = nil
	}
}

func (c *cursor) skip(n int) {
	if n < 0 || n > len(c.b) {
		c.fail("truncated")
		return
	}
	c.b = c.b[n:]
}

func (c *cursor) byte() byte {
	if len(c.b) < 1 {
		c.fail("truncated")
		return 0
	}
	v := c.b[0]
	c.b = c.b[1:]
	return v
}

func (c *cursor) expect(want byte) {
	if got := c.byte(); c.ok() && got != want {
		c.fail(fmt.Sprintf("expected %q, got %q", want, got))
	}
}

func (c *cursor) uint16() int {
	if len(c.b) < 2 {
		c.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint16(c.b)
	c.b = c.b[2:]
	return int(v)
}

func (c *cursor) uint32() uint32 {
	if len(c.b) < 4 {
		c.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint32(c.b)
	c.b = c.b[4:]
	return v
}

// cstring skips a NUL-terminated string.
func (c *cursor) cstring() {
	for i, b := range c.b {
		if b == 0 {
			c.b = c.b[i+1:]
			return
		}
	}
	c.fail("unterminated string")
}

// tuple skips TupleData: a column count, then per column a kind byte and,
// for 't' and 'b', a length and that many bytes.
func (c *cursor) tuple() {
	for n := c.uint16(); n > 0 && c.ok(); n-- {
		switch k := c.byte(); k {
		case 'n', 'u':
		case 't', 'b':
			c.skip(int(c.uint32()))
		default:
			if c.ok() {
				c.fail(fmt.Sprintf("tuple column kind %q", k))
			}
		}
	}
}

// values reads TupleData into a Tuple of rel's columns, copying each
// column's bytes; a tuple whose column count is not rel's fails.
func (c *cursor) values(rel *Relation) Tuple {
	n := c.uint16()
	if !c.ok() {
		return nil
	}
	if n != len(rel.Columns) {
		c.fail(fmt.Sprintf("tuple has %d columns, relation has %d", n, len(rel.Columns)))
		return nil
	}
	if n > len(c.b) { // each column takes a byte at least: bounded before the Tuple
		c.fail("truncated")
		return nil
	}
	t := make(Tuple, n)
	for i := range t {
		switch k := c.byte(); k {
		case 'n':
			t[i] = Value{Kind: Null}
		case 'u':
			t[i] = Value{Kind: Unchanged}
		case 't', 'b':
			size := int(c.uint32())
			if !c.ok() || size < 0 || size > len(c.b) {
				c.fail("truncated")
				return nil
			}
			v := Value{Kind: Text, Data: make([]byte, size)}
			if k == 'b' {
				v.Kind = Binary
			}
			copy(v.Data, c.b[:size])
			c.b = c.b[size:]
			t[i] = v
		default:
			if c.ok() {
				c.fail(fmt.Sprintf("tuple column kind %q", k))
			}
			return nil
		}
	}
	return t
}
