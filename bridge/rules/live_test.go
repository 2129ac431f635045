package rules_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/reconn"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/state"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// TestLiveReloadDiff: a reload returns what changed since the last accepted
// diff — the rules to start (new, changed, re-enabled) and to stop (changed,
// disabled, deleted, invalid) — keeps the invalid_rule rows equal to what is
// invalid, and forgets the backfill of a rule that stops; a diff that was
// not accepted is made again by the next reload. Against real PostgreSQL.
func TestLiveReloadDiff(t *testing.T) {
	ctx := context.Background()
	db := integration.NewDatabase(t)
	conn := db.Connect(t)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, note text)")
	exec(`INSERT INTO pgimageai.models (name, provider, model) VALUES ('m', 'local', 'any')`)
	tables, err := configTables(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	reg := provider.NewRegistry()
	reg.Register("local", local.Factory)
	conns := reconn.NewPair(db.DSN(), db.DSN())
	t.Cleanup(func() { conns.Close(context.Background()) })
	live := rules.NewLive(slog.New(slog.DiscardHandler), "pub_live_test", reg, os.LookupEnv, conns)

	// reload loads the configuration as the tables hold it now (as the WAL
	// would show it) and reloads.
	reload := func() rules.Diff {
		t.Helper()
		if err := live.Load(ctx, rules.DefaultGroup); err != nil {
			t.Fatal(err)
		}
		d, err := live.Reload(ctx, tables)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	names := func(rs []*rules.Rule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	openInvalid := func() []string {
		t.Helper()
		rows, _ := conn.Query(ctx, "SELECT rule FROM pgimageai.errors WHERE reason = 'invalid_rule' AND resolved_at IS NULL ORDER BY rule")
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(step string, d rules.Diff, start, stop, valid, invalid []string) {
		t.Helper()
		slices.Sort(d.Stop)
		if got := names(d.Start); !slices.Equal(got, start) {
			t.Errorf("%s: start %v, want %v", step, got, start)
		}
		if !slices.Equal(d.Stop, stop) {
			t.Errorf("%s: stop %v, want %v", step, d.Stop, stop)
		}
		var in []string
		for _, n := range []string{"a", "b", "c"} {
			if d.Set.Named(n) != nil {
				in = append(in, n)
			}
		}
		if !slices.Equal(in, valid) {
			t.Errorf("%s: the set holds %v, want %v", step, in, valid)
		}
		if got := openInvalid(); !slices.Equal(got, invalid) {
			t.Errorf("%s: open invalid_rule rows %v, want %v", step, got, invalid)
		}
	}

	exec(`INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('a', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'm', NULL, 'public.a_out', 'v'),
  ('b', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'm', 'Describe.', 'public.b_out', 'caption'),
  ('c', 'public.photos', 'nope', 'AI_IMAGE_COMPLETE', 'm', 'Describe.', 'public.c_out', 'caption')`)
	d := reload()
	check("first load", d, []string{"a", "b"}, nil, []string{"a", "b"}, []string{"c"})

	// Not accepted (the engine failed to apply it): the next reload gives
	// the same starts again.
	d = reload()
	check("again, not accepted", d, []string{"a", "b"}, nil, []string{"a", "b"}, []string{"c"})
	live.Accept(d)
	check("accepted, reloaded", reload(), nil, nil, []string{"a", "b"}, []string{"c"})

	// A changed prompt is a changed rule: stopped and started again. The
	// invalid rule fixed starts; the disabled one stops and its backfill
	// state is forgotten.
	if err := state.StartBackfill(ctx, conn, "a", "fp", []byte(`{"id": 9}`), 0); err != nil {
		t.Fatal(err)
	}
	exec("UPDATE pgimageai.rules SET prompt = 'Describe it.' WHERE name = 'b'")
	exec("UPDATE pgimageai.rules SET image_column = 'img' WHERE name = 'c'")
	exec("UPDATE pgimageai.rules SET enabled = false WHERE name = 'a'")
	d = reload()
	check("changed, fixed, disabled", d, []string{"b", "c"}, []string{"a", "b"}, []string{"b", "c"}, nil)
	if _, found, err := state.LoadBackfill(ctx, conn, "a"); err != nil || found {
		t.Errorf("the disabled rule's backfill: found %v (%v), want it forgotten", found, err)
	}
	live.Accept(d)

	// A misfit (its table no longer fits it, as the WAL showed) is invalid
	// until a recheck finds it fits again.
	live.Misfit(map[string]string{"b": "table public.photos no longer has image column \"img\""})
	d = reload()
	check("misfit", d, nil, []string{"b"}, []string{"c"}, []string{"b"})
	live.Accept(d)
	restore := live.Recheck()
	d = reload()
	check("rechecked", d, []string{"b"}, nil, []string{"b", "c"}, nil)
	// As after a failed recheck (the diff never applied): the misfit is
	// back, and nothing changed since the last accepted diff.
	restore()
	d = reload()
	check("restored", d, nil, nil, []string{"c"}, []string{"b"})
}

// configTables returns the OIDs of pgimageai.rules and pgimageai.models.
func configTables(ctx context.Context, conn *pgx.Conn) ([]uint32, error) {
	r, m, _, err := state.TableOIDs(ctx, conn)
	return []uint32{r, m}, err
}
