// Package pgtest starts a throwaway PostgreSQL server from the host's server
// binaries (initdb and postgres) for tests: a data directory in a temporary
// directory, TCP on 127.0.0.1 on a free port, trust authentication, fsync off,
// wal_level=logical. The integration harness falls back to it when Docker has
// no engine or no PostgreSQL image, so that the database-backed unit tests run
// instead of skipping; it is the demo's throwaway server (cmd/pgimageai's
// demo_pg.go) made for tests.
//
// The binaries come from PGIMAGEAI_TEST_PGBIN when set, else the newest of
// /usr/lib/postgresql/*/bin, /usr/pgsql-*/bin, /usr/local/pgsql/bin and
// pg_config --bindir. As root, the server runs as the postgres user (or
// nobody): PostgreSQL refuses to run as root.
//
// Layer: test helper; imports the standard library and internal/pgconnect only.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
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

// BinEnv names the environment variable that selects the server binaries.
const BinEnv = "PGIMAGEAI_TEST_PGBIN"

// Superuser is the role every DSN of a Server connects as.
const Superuser = "postgres"

// ErrNoBinaries reports that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found: install one (apt-get install postgresql) or set " + BinEnv)

// BinDir returns the directory of the server binaries to use.
func BinDir() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		if !isFile(filepath.Join(d, "initdb")) || !isFile(filepath.Join(d, "postgres")) {
			return "", fmt.Errorf("%s=%s holds no initdb and postgres", BinEnv, d)
		}
		return d, nil
	}
	var dirs []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin"} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	var found []string
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", ErrNoBinaries
	}
	// The newest major: the versioned directories' numbers, highest first.
	major := func(d string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(d)), "pgsql-"))
		return n
	}
	sort.SliceStable(found, func(i, j int) bool { return major(found[i]) > major(found[j]) })
	return found[0], nil
}

// Server is one throwaway PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	BinDir string
	Dir    string // data/, the socket, postgres.log
	Port   int

	args   []string
	as     *syscall.Credential // nil = the current user
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start initialises and starts a server; args are more server settings
// ("-c", "name=value") after the defaults. On error everything it created
// is removed again.
func Start(ctx context.Context, args ...string) (_ *Server, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	as, err := account()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgimageai-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{BinDir: bin, Dir: dir, as: as, args: args}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if as != nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, int(as.Uid), int(as.Gid)); err != nil {
			return nil, fmt.Errorf("hand %s to the server's user: %w", dir, err)
		}
	}
	initdb := s.command(ctx, "initdb", "-D", s.dataDir(), "-U", Superuser, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, bytes.TrimSpace(out))
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	if err := s.Restart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts the server again after Kill (or for the first time), on
// the same port, and waits until it accepts connections.
func (s *Server) Restart(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if s.as != nil {
		_ = os.Chown(logf.Name(), int(s.as.Uid), int(s.as.Gid))
	}
	args := append([]string{"-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(s.Port),
		"-c", "unix_socket_directories=" + s.Dir,
		"-c", "wal_level=logical",
		"-c", "max_replication_slots=20",
		"-c", "max_wal_senders=20",
		"-c", "max_connections=200",
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
	}, s.args...)
	cmd := s.command(context.Background(), "postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(ctx, exited, time.Minute)
}

// DSN returns a URL connecting to database db as the superuser over TCP.
func (s *Server) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

// Stop shuts the server down (fast, then immediate, then kill) and deletes
// its directory. It is safe to call more than once.
func (s *Server) Stop() error {
	s.shutdown()
	if s.Dir == "" {
		return nil
	}
	err := os.RemoveAll(s.Dir)
	s.Dir = ""
	return err
}

// shutdown stops the server process, keeping its data.
func (s *Server) shutdown() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGQUIT, os.Kill} {
		_ = cmd.Process.Signal(sig)
		select {
		case <-exited:
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// Kill stops the server (fast shutdown), keeping its data for Restart.
func (s *Server) Kill() { s.shutdown() }

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, name), args...)
	cmd.Dir = s.Dir
	env := []string{"LC_ALL=C"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.as}
	return cmd
}

func (s *Server) waitReady(ctx context.Context, exited chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgconnect.Connect(attempt, s.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("postgres exited during startup:\n%s", s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections after %s: %v\n%s", timeout, err, s.logTail())
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}

// account returns the credential to run the server as: nil unless root,
// then the postgres user or nobody.
func account() (*syscall.Credential, error) {
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
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and no postgres or nobody user to run PostgreSQL as")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
