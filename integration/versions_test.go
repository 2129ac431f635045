package integration_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/pgimageai/pgimageai/integration"
)

// TestPostgresMajor: the server the suite runs on is the PostgreSQL major
// version PGIMAGEAI_TEST_PG_MAJOR names (scripts/test runs a core subset on
// each version the docs claim, and this says the run was on it), and at
// least 14, the oldest the bridge accepts, when it names none.
func TestPostgresMajor(t *testing.T) {
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	var num int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		t.Fatal(err)
	}
	want, min := 0, 14
	if v := os.Getenv("PGIMAGEAI_TEST_PG_MAJOR"); v != "" {
		var err error
		if want, err = strconv.Atoi(v); err != nil {
			t.Fatalf("PGIMAGEAI_TEST_PG_MAJOR=%q: %v", v, err)
		}
	}
	t.Logf("server_version_num %d", num)
	switch {
	case want != 0 && num/10000 != want:
		t.Errorf("PostgreSQL %d, want %d (PGIMAGEAI_TEST_PG_MAJOR)", num/10000, want)
	case num/10000 < min:
		t.Errorf("PostgreSQL %d, want %d or later", num/10000, min)
	}
}
