package deploy

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeBridgeRole: in both Compose files the bridge connects as
// pgimageai_bridge, a role made by the PostgreSQL container's init script with
// LOGIN REPLICATION and nothing more, granted the least-privilege block of
// docs/operations.md; over TLS (sslmode=require, channel_binding=require; the
// server makes its key at the first start, ssl = on, and refuses the role
// without TLS); with an allow list of key variables. Only migrate and
// configure, the operator's one-shots, use the superuser.
func TestComposeBridgeRole(t *testing.T) {
	for _, file := range []string{"../compose.yaml", "../compose.offline.yaml"} {
		t.Run(file, func(t *testing.T) {
			env := map[string]string{"POSTGRES_PASSWORD": "super-pw", "PGIMAGEAI_BRIDGE_PASSWORD": "bridge-pw"}
			p := loadComposeFile(t, file, env)
			pg, bridge, configure := p.Services["postgres"], p.Services["pgimageai"], p.Services["configure"]

			dsn := mustEnv(t, bridge, "PGIMAGEAI_DSN")
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatalf("PGIMAGEAI_DSN: %v", err)
			}
			pw, _ := u.User.Password()
			if u.User.Username() != "pgimageai_bridge" || pw != "bridge-pw" {
				t.Errorf("the bridge connects as %q (password %q), want pgimageai_bridge with PGIMAGEAI_BRIDGE_PASSWORD", u.User.Username(), pw)
			}
			if q := u.Query(); q.Get("sslmode") != "require" || q.Get("channel_binding") != "require" {
				t.Errorf("the bridge's DSN %q: want sslmode=require and channel_binding=require", dsn)
			}
			if v := mustEnv(t, bridge, "PGIMAGEAI_KEY_ENV_ALLOW"); strings.TrimSpace(v) == "" || strings.Contains(v, "*") {
				t.Errorf("PGIMAGEAI_KEY_ENV_ALLOW = %q, want named variables (empty allows any)", v)
			}
			for _, name := range []string{"migrate", "pgimageai"} {
				if d := mustEnv(t, p.Services[name], "PGIMAGEAI_DSN"); strings.Contains(d, "sslmode=disable") {
					t.Errorf("%s: DSN %q disables TLS", name, d)
				}
			}
			if mu, err := url.Parse(mustEnv(t, p.Services["migrate"], "PGIMAGEAI_DSN")); err != nil || mu.User.Username() != "postgres" {
				t.Errorf("migrate: DSN %v (%v), want the superuser, which creates the schema", mu, err)
			}

			// The PostgreSQL container runs the init script, with the role's password.
			if v := mustEnv(t, pg, "PGIMAGEAI_BRIDGE_PASSWORD"); v != "bridge-pw" {
				t.Errorf("postgres: PGIMAGEAI_BRIDGE_PASSWORD = %q, want the bridge's DSN's", v)
			}
			if !hasBind(pg, "deploy/compose/initdb", "/docker-entrypoint-initdb.d") {
				t.Errorf("postgres does not mount deploy/compose/initdb at /docker-entrypoint-initdb.d: %+v", pg.Volumes)
			}
			// configure grants the role after the example's tables exist.
			if !hasBind(configure, "deploy/compose/bridge-grants.sql", "/bridge-grants.sql") ||
				!slices.Contains(configure.Command, "/bridge-grants.sql") || configure.Command[len(configure.Command)-1] != "/bridge-grants.sql" {
				t.Errorf("configure does not run bridge-grants.sql last: %v %+v", configure.Command, configure.Volumes)
			}
			if v := mustEnv(t, configure, "PGSSLMODE"); v != "require" {
				t.Errorf("configure: PGSSLMODE = %q, want require", v)
			}
		})
	}
}

// TestComposeInitScript: the init script makes the role with no attribute
// beyond LOGIN REPLICATION, its password from the environment (not argv),
// a key and certificate of its own, ssl = on, and pg_hba lines that refuse
// the role without TLS ahead of every other line.
func TestComposeInitScript(t *testing.T) {
	b, err := os.ReadFile("compose/initdb/pgimageai.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	if fi, err := os.Stat("compose/initdb/pgimageai.sh"); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("pgimageai.sh is not executable (%v): the official image sources it then, and its set -eu applies to the entrypoint", err)
	}
	create := regexp.MustCompile(`(?m)^CREATE ROLE pgimageai_bridge ([^;]*);`).FindStringSubmatch(script)
	if create == nil {
		t.Fatalf("pgimageai.sh creates no role pgimageai_bridge")
	}
	attrs := strings.Fields(create[1])
	for _, want := range []string{"LOGIN", "REPLICATION", "NOSUPERUSER", "NOCREATEROLE", "NOCREATEDB", "PASSWORD", ":'pw'"} {
		if !slices.Contains(attrs, want) {
			t.Errorf("CREATE ROLE %s: lacks %s", create[1], want)
		}
	}
	for _, bad := range []string{"SUPERUSER", "CREATEROLE", "CREATEDB", "BYPASSRLS"} {
		if slices.Contains(attrs, bad) {
			t.Errorf("CREATE ROLE %s: grants %s", create[1], bad)
		}
	}
	for _, want := range []string{
		`\getenv pw PGIMAGEAI_BRIDGE_PASSWORD`,
		"openssl req -new -x509",
		`-keyout "$PGDATA/server.key"`,
		`chmod 600 "$PGDATA/server.key"`,
		`ssl = on`,
		`hostnossl all pgimageai_bridge all reject`,
		`hostnossl replication pgimageai_bridge all reject`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("pgimageai.sh lacks %q", want)
		}
	}
	// The reject lines are written before the existing pg_hba.conf.
	if i, j := strings.Index(script, "hostnossl all"), strings.Index(script, `cat "$PGDATA/pg_hba.conf"`); i < 0 || j < i {
		t.Error("pgimageai.sh appends the reject lines after pg_hba.conf's own, where the first match never reaches them")
	}
}

// TestComposeGrantsAreTheDocs: bridge-grants.sql holds every statement of
// the least-privilege block of docs/operations.md but CREATE ROLE (the init
// script's), so the Compose role is the documented one.
func TestComposeGrantsAreTheDocs(t *testing.T) {
	docs, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(docs)
	i, j := strings.Index(s, "<!-- least-privilege:begin -->"), strings.Index(s, "<!-- least-privilege:end -->")
	if i < 0 || j < i {
		t.Fatal("docs/operations.md has no least-privilege block")
	}
	grants, err := os.ReadFile("compose/bridge-grants.sql")
	if err != nil {
		t.Fatal(err)
	}
	have := sqlStatements(string(grants))
	n := 0
	for _, st := range sqlStatements(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s[i+len("<!-- least-privilege:begin -->"):j]), "```sql"), "```")) {
		switch {
		case strings.HasPrefix(st, "CREATE ROLE"):
			continue
		case strings.HasPrefix(st, "CREATE PUBLICATION"):
			// made only when missing: SELECT '<statement>' WHERE NOT EXISTS (…) \gexec
			if !slices.ContainsFunc(have, func(h string) bool { return strings.Contains(h, "SELECT '"+st+"' WHERE NOT EXISTS") }) {
				t.Errorf("bridge-grants.sql does not make the publication of the docs: %s", st)
			}
		case !slices.Contains(have, st):
			t.Errorf("bridge-grants.sql lacks the docs' statement: %s", st)
		}
		n++
	}
	if n < 8 {
		t.Fatalf("only %d statements in the docs' block", n)
	}
}

// sqlStatements splits SQL into statements, comments dropped and white space
// collapsed.
func sqlStatements(sql string) []string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if k := strings.Index(line, "--"); k >= 0 {
			line = line[:k]
		}
		b.WriteString(line + " ")
	}
	var out []string
	for _, st := range strings.Split(b.String(), ";") {
		if st = strings.Join(strings.Fields(st), " "); st != "" {
			out = append(out, st)
		}
	}
	return out
}

func mustEnv(t *testing.T, s types.ServiceConfig, name string) string {
	t.Helper()
	v := s.Environment[name]
	if v == nil {
		t.Fatalf("service %s: %s is not set", s.Name, name)
	}
	return *v
}

// hasBind reports whether s bind-mounts the repository's path source (relative
// to the repository) at target.
func hasBind(s types.ServiceConfig, source, target string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, "/"+source) && v.Target == target && v.ReadOnly {
			return true
		}
	}
	return false
}
