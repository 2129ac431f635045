package switchover

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/internal/supervise"
)

// TestCoordinatorTake: a marker does something once, and only when the
// coordinator placed it: a forged or replayed message (any role that may
// write messages can write one with this prefix) does nothing.
func TestCoordinatorTake(t *testing.T) {
	c := NewCoordinator(supervise.New(), slog.New(slog.NewTextHandler(io.Discard, nil)), "", "")
	written := errors.New("the source is unreachable")
	c.emit = func(context.Context, string) error { return written }
	c.Place(Marker{Drop: &rules.Drop{Rule: "vec", Side: "vec@1234abcd"}})
	if c.DropPlaced("vec@1234abcd") || len(c.markers) != 0 {
		t.Fatal("a marker that could not be written is registered: it would never be placed again")
	}
	written = nil
	c.Place(Marker{Drop: &rules.Drop{Rule: "vec", Side: "vec@1234abcd"}})
	if !c.DropPlaced("vec@1234abcd") || c.Placed("vec@1234abcd") {
		t.Fatal("the drop's marker is not placed as a drop's")
	}
	var nonce string
	for n := range c.markers {
		nonce = n
	}
	content := func(id string) []byte { b, _ := json.Marshal(map[string]string{"switch": id}); return b }
	tests := []struct {
		name    string
		content []byte
		ok      bool
	}{
		{name: "forged", content: content("00000000000000000000000000000000")},
		{name: "not a marker", content: []byte(`{"page":"x"}`)},
		{name: "garbage", content: []byte("\x00\xff")},
		{name: "placed", content: content(nonce), ok: true},
		{name: "replayed", content: content(nonce)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := c.Take(tc.content)
			if ok != tc.ok || ok && (m.Drop == nil || m.Drop.Side != "vec@1234abcd") {
				t.Errorf("Take = %+v, %v; want ok %v", m, ok, tc.ok)
			}
		})
	}
	if c.DropPlaced("vec@1234abcd") {
		t.Error("the drop's marker is still placed after it was taken")
	}
}
