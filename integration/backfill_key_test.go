package integration_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// TestBackfillCommaKey: a primary key whose first column is literally named
// `id, part` backfills (the greatest-key query quotes each column before
// appending DESC) and streams like any other.
func TestBackfillCommaKey(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	const keyA, keyB = "id, part", "n"
	table := pgx.Identifier{"public", "comma_keys"}.Sanitize()
	s.exec(t, fmt.Sprintf("CREATE TABLE %s (%s int, %s int, img bytea, PRIMARY KEY (%s, %s))",
		table, quoted(keyA), quoted(keyB), quoted(keyA), quoted(keyB)))
	insert := func(a, b int, img []byte) {
		t.Helper()
		s.exec(t, fmt.Sprintf("INSERT INTO %s (%s, %s, img) VALUES ($1, $2, $3)", table, quoted(keyA), quoted(keyB)), a, b, img)
	}
	imgs := map[[2]int][]byte{{1, 1}: pngImage(t, 1), {1, 2}: pngImage(t, 2), {2, 1}: pngImage(t, 3)}
	for k, img := range imgs {
		insert(k[0], k[1], img)
	}
	ai := newFakeAI(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ('m', 'openai', $1, 'gpt-test')`, ai.BaseURL())
	s.start(t, s.config(t))
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('comma', 'public.comma_keys', 'img', 'AI_IMAGE_COMPLETE', 'm', 'Describe', 'public.comma_out', 'caption')`)
	integration.WaitFor(t, 30*time.Second, "the backfill to finish", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'comma' AND state = 'done'") == 1
	})
	imgs[[2]int{3, 1}] = pngImage(t, 4)
	insert(3, 1, imgs[[2]int{3, 1}])
	s.sync(t, 30*time.Second)

	for k, img := range imgs {
		var got string
		q := fmt.Sprintf("SELECT coalesce(caption, 'NULL') FROM public.comma_out WHERE %s = $1 AND %s = $2", quoted(keyA), quoted(keyB))
		if err := s.conn.QueryRow(t.Context(), q, k[0], k[1]).Scan(&got); err != nil {
			t.Errorf("target row %v: %v", k, err)
			continue
		}
		if want := captionOf(magic.DataURL(magic.PNG, img)); got != want {
			t.Errorf("target row %v = %q, want %q", k, got, want)
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'comma' AND resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors rows for the rule, want 0", n)
	}
}
