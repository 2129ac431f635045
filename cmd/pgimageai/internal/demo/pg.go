package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pgimageai/pgimageai/internal/pgconnect"
)

// minDemoMajor is the oldest PostgreSQL the demo starts.
const minDemoMajor = 14

// pgInstall is one set of PostgreSQL server binaries.
type pgInstall struct {
	BinDir  string
	Version string // e.g. "15.14"
	Major   int
}

// errNoPostgres reports that no server binaries were found; the message says
// what to install.
var errNoPostgres = errors.New("no PostgreSQL server binaries found (initdb and postgres): " +
	"the demo starts a throwaway PostgreSQL " + strconv.Itoa(minDemoMajor) + " or later; install one, " +
	"e.g. `apt-get install postgresql` (Debian, Ubuntu), `dnf install postgresql-server` (Fedora, RHEL) " +
	"or `brew install postgresql` (macOS)")

// pgBinDirs lists the directories that may hold server binaries: pg_config's,
// the distributions' versioned directories, and initdb on PATH.
func pgBinDirs() []string {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",         // Debian, Ubuntu
		"/usr/pgsql-*/bin",                  // PGDG RPMs
		"/opt/homebrew/opt/postgresql*/bin", // Homebrew, Apple silicon
		"/usr/local/opt/postgresql*/bin",    // Homebrew, Intel
		"/usr/local/pgsql/bin",              // built from source
	} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	return dirs
}

// findPostgres returns the newest installation among dirs; version runs
// `postgres --version` in a directory.
func findPostgres(dirs []string, version func(binDir string) (string, error)) (pgInstall, error) {
	seen := map[string]bool{}
	var found []pgInstall
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if !isFile(filepath.Join(d, "initdb")) || !isFile(filepath.Join(d, "postgres")) {
			continue
		}
		out, err := version(d)
		if err != nil {
			continue
		}
		v, major, ok := parsePostgresVersion(out)
		if !ok {
			continue
		}
		found = append(found, pgInstall{BinDir: d, Version: v, Major: major})
	}
	if len(found) == 0 {
		return pgInstall{}, errNoPostgres
	}
	sort.SliceStable(found, func(i, j int) bool { return versionLess(found[j].Version, found[i].Version) })
	best := found[0]
	if best.Major < minDemoMajor {
		return pgInstall{}, fmt.Errorf("found PostgreSQL %s in %s, but the demo needs %d or later: install a newer one, e.g. `apt-get install postgresql`",
			best.Version, best.BinDir, minDemoMajor)
	}
	return best, nil
}

// postgresVersion runs `postgres --version`, which works as root too.
func postgresVersion(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "postgres"), "--version").Output()
	return string(out), err
}

// parsePostgresVersion reads "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)".
func parsePostgresVersion(s string) (version string, major int, ok bool) {
	_, rest, found := strings.Cut(s, "(PostgreSQL) ")
	if !found {
		return "", 0, false
	}
	version, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
	digits := version
	if i := strings.IndexFunc(version, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = version[:i]
	}
	major, err := strconv.Atoi(digits)
	if err != nil {
		return "", 0, false
	}
	return version, major, true
}

// versionLess compares dotted versions numerically ("9.6" < "15.2" < "15.14").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(strings.TrimRightFunc(as[i], func(r rune) bool { return r < '0' || r > '9' }))
		y, _ := strconv.Atoi(strings.TrimRightFunc(bs[i], func(r rune) bool { return r < '0' || r > '9' }))
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// account is the unprivileged user that runs initdb and postgres when the
// demo runs as root (both refuse to run as root).
type account struct {
	Name     string
	UID, GID uint32
}

// serverAccount returns nil when the process is not root, else the postgres
// system user or, failing that, nobody.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &account{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (it refuses to run as root): run the demo as an ordinary user")
}

// cluster is a throwaway PostgreSQL server: a data directory in a temporary
// directory, TCP on 127.0.0.1 only, trust authentication, fsync off. Stop
// shuts it down and deletes everything; it is safe to call more than once.
type cluster struct {
	pgInstall
	Dir  string // temporary directory: data/, the socket, postgres.log
	Port int
	As   *account // nil = the current user

	// In Docker (startDockerCluster): the container, its image and how it was chosen;
	// Dir is empty then.
	Container, Image, ImageHow string

	cmd      *exec.Cmd
	exited   chan struct{} // closed when postgres exited
	stopOnce sync.Once
	stopErr  error
}

// DSN connects as the superuser over TCP.
func (c *cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&application_name=pgimageai-demo", c.Port)
}

func (c *cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *cluster) logFile() string { return filepath.Join(c.Dir, "postgres.log") }

// startCluster initialises and starts a server of pg. On error everything it
// created is removed again.
func startCluster(ctx context.Context, pg pgInstall) (_ *cluster, err error) {
	as, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgimageai-demo-")
	if err != nil {
		return nil, err
	}
	c := &cluster{pgInstall: pg, Dir: dir, As: as}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if as != nil {
		if err := os.Chown(dir, int(as.UID), int(as.GID)); err != nil {
			return nil, fmt.Errorf("hand %s to user %s: %w", dir, as.Name, err)
		}
		if p := unreachableParent(dir); p != "" {
			return nil, fmt.Errorf("running as root, PostgreSQL runs as user %s, which cannot enter %s: set TMPDIR to a directory it can reach, e.g. TMPDIR=/tmp", as.Name, p)
		}
	}
	initdb := c.command(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("initdb: %v\n%s", err, bytes.TrimSpace(out))
	}
	if c.Port, err = freePort(); err != nil {
		return nil, err
	}
	logf, err := os.Create(c.logFile())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// No CommandContext: Stop shuts the server down in order, after the
	// bridge let go of it.
	c.cmd = c.command(context.Background(), "postgres", "-D", c.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(c.Port),
		"-c", "unix_socket_directories="+c.Dir,
		"-c", "wal_level=logical",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=30",
	)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c.exited = make(chan struct{})
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	return c, c.waitReady(ctx, 30*time.Second)
}

// command runs a binary of the installation as the server account, in a
// process group of its own so that a Ctrl-C in the terminal reaches only the
// demo, which then stops the server in order.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = serverEnv(os.Environ())
	cmd.SysProcAttr = serverProcAttr(c.As)
	return cmd
}

// serverEnv drops the libpq and locale variables of the caller, which could
// point the server elsewhere or change its messages.
func serverEnv(env []string) []string {
	out := []string{"LC_ALL=C"}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// unreachableParent returns the first ancestor of dir that others cannot
// enter, or "".
func unreachableParent(dir string) string {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return p
		}
		if p == filepath.Dir(p) {
			return ""
		}
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the server accepts connections.
func (c *cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgconnect.Connect(attempt, c.DSN())
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.exited:
			return fmt.Errorf("postgres exited during startup:\n%s", c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections after %s: %v\n%s", timeout, err, c.logTail())
		}
	}
}

// logTail returns the last lines of the server log.
func (c *cluster) logTail() string {
	if c.Container != "" {
		out, _ := exec.Command("docker", "logs", "--tail", "10", c.Container).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	b, _ := os.ReadFile(c.logFile())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// Stop shuts the server down (fast shutdown: SIGINT; then immediate, then
// kill, if it lingers) and deletes the temporary directory.
func (c *cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.Container != "" {
			c.stopErr = c.stopContainer()
			return
		}
		if c.cmd != nil && c.cmd.Process != nil {
			for _, s := range []struct {
				sig  os.Signal
				wait time.Duration
			}{{syscall.SIGINT, 15 * time.Second}, {syscall.SIGQUIT, 5 * time.Second}, {os.Kill, 5 * time.Second}} {
				_ = c.cmd.Process.Signal(s.sig)
				select {
				case <-c.exited:
				case <-time.After(s.wait):
					continue
				}
				break
			}
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			c.stopErr = fmt.Errorf("remove %s: %w", c.Dir, err)
		}
	})
	return c.stopErr
}
