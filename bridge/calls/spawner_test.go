package calls

import (
	"testing"

	"github.com/pgimageai/pgimageai/internal/supervise"
)

// testSpawner returns a supervisor stopped hard, and joined, at the end of
// the test.
func testSpawner(t *testing.T) *supervise.Supervisor {
	t.Helper()
	sp := supervise.New()
	t.Cleanup(func() { sp.Stop(0) })
	return sp
}
