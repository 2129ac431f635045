// Standby: a PostgreSQL primary and a physical standby of it, for failover tests.

package integration

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ory/dockertest/v3/docker"
)

// StandbySlot is the physical replication slot the standby of StartStandby
// streams from, named in the primary's synchronized_standby_slots.
const StandbySlot = "standby1"

// StartStandby starts a primary and a physical standby of it (PostgreSQL 17,
// each in a container of its own, purged in tb.Cleanup), set up for failover
// slots as the PostgreSQL documentation describes
// (https://www.postgresql.org/docs/17/logicaldecoding-explanation.html#LOGICALDECODING-REPLICATION-SLOTS-SYNCHRONIZATION):
// the standby streams through the physical slot StandbySlot with
// hot_standby_feedback and sync_replication_slots on, and a primary_conninfo
// that names a database; the primary lists StandbySlot in
// synchronized_standby_slots and waits for the standby at commit
// (synchronous_standby_names = '*'), so that what the primary committed is
// on the standby when it is promoted. It returns once the standby streams
// synchronously.
func StartStandby(tb testing.TB) (primary, standby *Postgres) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	primary = StartPostgres(tb)
	if err := primary.Exec(ctx, "postgres", "SELECT pg_create_physical_replication_slot($1)", StandbySlot); err != nil {
		tb.Fatalf("integration: standby slot: %v", err)
	}
	ip, err := primary.networkIP(ctx)
	if err != nil {
		tb.Fatalf("integration: %v", err)
	}
	standby, err = start(ctx, standbyCmd(ip))
	if err != nil {
		fail(tb, err)
	}
	tb.Cleanup(func() {
		if err := standby.Purge(); err != nil {
			tb.Errorf("purge standby container: %v", err)
		}
	})
	for _, sql := range []string{
		"ALTER SYSTEM SET synchronized_standby_slots = '" + StandbySlot + "'",
		"ALTER SYSTEM SET synchronous_standby_names = '*'",
		"SELECT pg_reload_conf()",
	} {
		if err := primary.Exec(ctx, "postgres", sql); err != nil {
			tb.Fatalf("integration: primary: %v", err)
		}
	}
	conn, err := pgx.Connect(ctx, primary.DSN("postgres"))
	if err != nil {
		tb.Fatalf("integration: %v", err)
	}
	defer conn.Close(context.Background())
	for {
		var state string
		err := conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'").Scan(&state)
		if err == nil && state == "sync" {
			return primary, standby
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("integration: the standby does not stream synchronously (last: %q, %v)\nstandby log:\n%s", state, err, standby.logs(context.Background()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// standbyCmd is the standby container's command: as root, prepare the data
// directory; as postgres, copy the primary at ip with pg_basebackup (-R
// writes standby.signal, primary_conninfo with the database, and
// primary_slot_name) and run the server as a hot standby that synchronises
// failover slots.
func standbyCmd(ip string) []string {
	const dir = "/var/lib/postgresql/data"
	conninfo := fmt.Sprintf("host=%s port=5432 user=%s password=%s dbname=postgres", ip, Superuser, password)
	server := strings.Join(append([]string{"exec postgres -D " + dir,
		"-c hot_standby=on -c hot_standby_feedback=on -c sync_replication_slots=on"}, serverArgs...), " ")
	inner := fmt.Sprintf(`set -eu
if [ ! -s %[1]s/PG_VERSION ]; then
  pg_basebackup -d %[2]s -D %[1]s -R -S %[3]s -X stream
fi
%[4]s`, dir, shellQuote(conninfo), StandbySlot, server)
	outer := fmt.Sprintf(`set -eu
mkdir -p %[1]s /var/run/postgresql
chown postgres:postgres %[1]s /var/run/postgresql
chmod 700 %[1]s
chmod 3777 /var/run/postgresql
exec setpriv --reuid=postgres --regid=postgres --init-groups env HOME=/var/lib/postgresql bash -c %[2]s`, dir, shellQuote(inner))
	return []string{"bash", "-c", outer}
}

// networkIP returns p's address on its Docker network, which other
// containers reach.
func (p *Postgres) networkIP(ctx context.Context) (string, error) {
	if !p.InDocker() {
		return "", errNotDocker
	}
	c, err := p.pool.Client.InspectContainerWithContext(p.res.Container.ID, ctx)
	if err != nil {
		return "", fmt.Errorf("inspect postgres container: %w", err)
	}
	for _, n := range c.NetworkSettings.Networks {
		if n.IPAddress != "" {
			return n.IPAddress, nil
		}
	}
	return "", fmt.Errorf("the postgres container has no network address")
}

// Crash ends the server at once, the way pg_ctl stop -m immediate does
// (SIGQUIT to the postmaster: no shutdown checkpoint, clients cut off),
// and waits until the container has exited.
func (p *Postgres) Crash(ctx context.Context) error {
	if !p.InDocker() {
		return errNotDocker
	}
	id := p.res.Container.ID
	if err := p.pool.Client.KillContainer(docker.KillContainerOptions{ID: id, Signal: docker.SIGQUIT, Context: ctx}); err != nil {
		return fmt.Errorf("crash postgres: %w", err)
	}
	if _, err := p.pool.Client.WaitContainerWithContext(id, ctx); err != nil {
		return fmt.Errorf("crash postgres: wait for exit: %w", err)
	}
	return nil
}

// MultiHostDSN returns a connection string for database db that lists the
// servers ps in order with target_session_attrs=read-write, as a client of
// a primary with standbys is configured: libpq and pgx connect to the first
// that accepts writes.
func MultiHostDSN(db string, ps ...*Postgres) string {
	var hosts []string
	for _, p := range ps {
		p.mu.Lock()
		hosts = append(hosts, net.JoinHostPort(p.host, p.port))
		p.mu.Unlock()
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(Superuser, password),
		Host:     strings.Join(hosts, ","),
		Path:     "/" + db,
		RawQuery: "sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
	}
	return u.String()
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
