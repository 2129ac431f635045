package switchover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

// Prefix is the prefix of the logical decoding message at which the engine
// switches a rule or drops given-up side work. A marker does anything only
// when it holds a nonce the engine registered itself (NewNonce): a role
// that may write messages cannot steer the bridge with one.
const Prefix = "pgimageai.switch"

// NewNonce returns a secret marker ID.
func NewNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ParseMarker returns the ID of a marker message's content.
func ParseMarker(content []byte) (string, bool) {
	var m struct{ Switch string }
	if json.Unmarshal(content, &m) != nil || m.Switch == "" {
		return "", false
	}
	return m.Switch, true
}

// Emit places the marker of nonce in the source's WAL, in a transaction of
// its own.
func Emit(ctx context.Context, srcDSN, nonce string) error {
	conn, err := pgconnect.Connect(ctx, srcDSN)
	if err != nil {
		return fmt.Errorf("place a switch marker: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	content, _ := json.Marshal(map[string]string{"switch": nonce})
	if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", Prefix, string(content)); err != nil {
		return fmt.Errorf("place a switch marker: %w", err)
	}
	return nil
}
