package catalog_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

func TestQualify(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bare", "photos", "public.photos"},
		{"qualified", "app.photos", "app.photos"},
		{"quoted bare", `"My Table"`, `public."My Table"`},
		{"quoted with a dot inside", `"a.b"`, `public."a.b"`},
		{"quoted schema", `"Odd Schema"."My Table"`, `"Odd Schema"."My Table"`},
		{"escaped quote then dot", `"a""b".c`, `"a""b".c`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := catalog.Qualify(tt.in); got != tt.want {
				t.Errorf("Qualify(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// connect returns a session as the bridge opens one, on a fresh database
// where setup ran.
func connect(t *testing.T, setup string) *pgx.Conn {
	t.Helper()
	db := integration.NewDatabase(t)
	db.Exec(t, setup)
	conn, err := pgconnect.Connect(context.Background(), db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestLookupBareNameIsPublic: under the bridge's search_path (pg_catalog,
// pg_temp) a bare name still names the table of public, not one of a
// schema earlier in a role's own search_path.
func TestLookupBareNameIsPublic(t *testing.T) {
	conn := connect(t, `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea);
CREATE SCHEMA postgres; CREATE TABLE postgres.photos (id int PRIMARY KEY)`)
	for _, name := range []string{"photos", "public.photos", `"photos"`} {
		table, err := catalog.Lookup(context.Background(), conn, name)
		if err != nil || table.Schema != "public" || table.Regclass != "public.photos" {
			t.Errorf("Lookup(%q) = %+v, %v; want public.photos", name, table, err)
		}
	}
}

func TestUserCode(t *testing.T) {
	conn := connect(t, `
CREATE FUNCTION public.f(text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION public.tf() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TABLE public.plain (id int PRIMARY KEY, caption text CHECK (length(caption) < 1000), other int REFERENCES public.plain);
CREATE INDEX ON public.plain (lower(caption));
CREATE TABLE public.triggered (id int PRIMARY KEY, caption text);
CREATE TRIGGER t1 BEFORE UPDATE ON public.triggered FOR EACH ROW EXECUTE FUNCTION public.tf();
CREATE TABLE public.ruled (id int PRIMARY KEY, caption text);
CREATE RULE r1 AS ON UPDATE TO public.ruled DO ALSO NOTIFY x;
CREATE TABLE public.checked (id int PRIMARY KEY, caption text CHECK (public.f(caption)));
CREATE TABLE public.indexed (id int PRIMARY KEY, caption text);
CREATE INDEX ON public.indexed (id) WHERE public.f(caption);
CREATE TABLE public.parted (id int PRIMARY KEY, caption text) PARTITION BY RANGE (id);
CREATE TABLE public.parted_1 PARTITION OF public.parted FOR VALUES FROM (0) TO (100);
CREATE TRIGGER t2 BEFORE UPDATE ON public.parted_1 FOR EACH ROW EXECUTE FUNCTION public.tf();
CREATE TABLE public.disabled (id int PRIMARY KEY, caption text);
CREATE TRIGGER t3 BEFORE UPDATE ON public.disabled FOR EACH ROW EXECUTE FUNCTION public.tf();
ALTER TABLE public.disabled DISABLE TRIGGER t3;`)
	tests := []struct {
		table string
		want  []string
	}{
		{"public.plain", nil}, // pg_catalog's functions and a foreign key's internal triggers are no one's code
		{"public.triggered", []string{"trigger t1 on public.triggered"}},
		{"public.ruled", []string{"rule r1 on public.ruled"}},
		{"public.checked", []string{"function public.f(text)"}},
		{"public.indexed", []string{"function public.f(text)"}},
		{"public.parted", []string{"trigger t2 on public.parted_1"}},
		{"public.disabled", []string{"trigger t3 on public.disabled"}}, // its owner can enable it at any time
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			table, err := catalog.Lookup(context.Background(), conn, tt.table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := catalog.UserCode(context.Background(), conn, table.OID)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("UserCode = %q, %v; want %q", got, err, tt.want)
			}
			// The write's guard fails exactly when there is code.
			_, err = conn.Exec(context.Background(), catalog.UserCodeGuard(table))
			if (err != nil) != (len(tt.want) > 0) {
				t.Errorf("guard: %v, want an error %v", err, len(tt.want) > 0)
			}
		})
	}
}

func TestDomainCode(t *testing.T) {
	conn := connect(t, `
CREATE FUNCTION public.f(text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE DOMAIN public.safe AS text CHECK (length(VALUE) < 10);
CREATE DOMAIN public.spy AS text CHECK (public.f(VALUE));
CREATE DOMAIN public.spy_over AS public.spy;
CREATE TABLE public.plain (id int PRIMARY KEY, tag public.safe);
CREATE TABLE public.direct (id int PRIMARY KEY, tag public.spy);
CREATE TABLE public.nested (id int PRIMARY KEY, tag public.spy_over);
CREATE TABLE public.arrayed (id int PRIMARY KEY, tags public.spy[]);`)
	tests := []struct {
		table string
		want  []string
	}{
		{"public.plain", nil},
		{"public.direct", []string{"domain public.spy (function public.f(text))"}},
		{"public.nested", []string{"domain public.spy (function public.f(text))"}},
		{"public.arrayed", []string{"domain public.spy (function public.f(text))"}},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			table, err := catalog.Lookup(context.Background(), conn, tt.table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := catalog.DomainCode(context.Background(), conn, table.OID)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("DomainCode = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRowSecurity(t *testing.T) {
	db := integration.NewDatabase(t)
	db.Exec(t, `CREATE ROLE rls_reader_`+db.Name+` LOGIN PASSWORD 'pw';
CREATE TABLE public.open (id int PRIMARY KEY);
CREATE TABLE public.policed (id int PRIMARY KEY);
ALTER TABLE public.policed ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON public.open, public.policed TO rls_reader_`+db.Name)
	t.Cleanup(func() {
		_ = db.Postgres().Exec(context.Background(), db.Name, "DROP OWNED BY rls_reader_"+db.Name)
		_ = db.Postgres().Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS rls_reader_"+db.Name)
	})
	cfg, err := pgconnect.ParseConfig(db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "rls_reader_"+db.Name, "pw"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for table, want := range map[string]bool{"public.open": false, "public.policed": true} {
		tb, err := catalog.Lookup(context.Background(), conn, table)
		if err != nil {
			t.Fatal(err)
		}
		got, err := catalog.RowSecurity(context.Background(), conn, tb.OID)
		if err != nil || got != want {
			t.Errorf("RowSecurity(%s) = %v, %v; want %v", table, got, err, want)
		}
	}
	// And a read of the policed table fails rather than run a policy.
	_, err = conn.Exec(context.Background(), "SELECT * FROM public.policed")
	var code string
	if pgErr, ok := err.(interface{ SQLState() string }); ok {
		code = pgErr.SQLState()
	}
	if code != "42501" {
		t.Errorf("read of a policed table: %v, want SQLSTATE 42501", err)
	}
}
