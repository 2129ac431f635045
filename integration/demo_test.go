package integration_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoRun is one `pgimageai demo` child process in a TMPDIR of its own, so
// that the test can tell whether it left a directory or a server behind.
type demoRun struct {
	tmp            string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func newDemoRun(t *testing.T) *demoRun {
	t.Helper()
	// Not t.TempDir: as root the demo runs PostgreSQL as an unprivileged user,
	// which must be able to enter the directory.
	tmp, err := os.MkdirTemp("", "pgimageai-demo-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	d := &demoRun{tmp: tmp, cmd: exec.Command(pgimageaiBinary(t), "demo")}
	// Offline and deterministic: the local provider, whatever the caller's
	// environment holds.
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "OPENAI_API_KEY", "OPENAI_BASE_URL", "TMPDIR":
		default:
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Env = append(d.cmd.Env, "TMPDIR="+tmp)
	d.cmd.Stderr = &d.stderr
	t.Cleanup(func() {
		if d.cmd.Process != nil && d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("pgimageai demo stdout:\n%s\nstderr:\n%s", d.stdout.String(), d.stderr.String())
		}
	})
	return d
}

// skipWithoutPostgres skips only where the harness would skip a missing
// Docker engine: with -short outside CI.
func (d *demoRun) skipWithoutPostgres(t *testing.T) {
	t.Helper()
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	if strings.Contains(d.stderr.String(), "no PostgreSQL server binaries found") && !ci && testing.Short() {
		t.Skip("no PostgreSQL server binaries (skipped because of -short outside CI)") // ok-to-skip: -short outside CI
	}
}

// assertCleanedUp checks that the demo removed its directory and that no
// server of it runs any more.
func (d *demoRun) assertCleanedUp(t *testing.T) {
	t.Helper()
	left, err := os.ReadDir(d.tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(d.tmp)) {
			t.Errorf("process still running: %s: %s", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if m := regexp.MustCompile(`on 127\.0\.0\.1:(\d+),`).FindStringSubmatch(d.stdout.String()); m != nil {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+m[1], time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on the demo's port %s", m[1])
		}
	}
}

// TestDemo runs `pgimageai demo` as a user would and checks its output: the
// four sample images captioned and embedded, the NULL image with NULL results
// and no error, and exactly three errors rows per rule.
func TestDemo(t *testing.T) {
	d := newDemoRun(t)
	d.cmd.Stdout = &d.stdout
	began := time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(3 * time.Minute):
		t.Fatal("pgimageai demo did not finish within 3m")
	}
	if err != nil {
		d.skipWithoutPostgres(t)
		t.Fatalf("pgimageai demo: %v (want exit 0)", err)
	}
	t.Logf("pgimageai demo took %s:\n%s", time.Since(began).Round(time.Millisecond), d.stdout.String())
	if d.stderr.Len() > 0 {
		t.Errorf("stderr not empty (the bridge logs at WARN):\n%s", d.stderr.String())
	}
	d.assertCleanedUp(t)

	out := d.stdout.String()
	results := table(t, out, "ID")
	if len(results) != 10 {
		t.Fatalf("%d result rows, want 10", len(results))
	}
	embedding := regexp.MustCompile(`^\[(-?\d+\.\d{3} ){4}…\] dim (\d+)$`)
	for i, want := range []struct{ name, format string }{
		{"sky.png", "PNG"}, {"red-square.jpg", "JPEG"}, {"checkerboard.gif", "GIF"}, {"sun.webp", "WebP"},
	} {
		r := results[i]
		if r["ID"] != strconv.Itoa(i+1) || r["NAME"] != want.name || r["FORMAT"] != want.format {
			t.Errorf("row %d = %v, want id %d, %s, %s", i, r, i+1, want.name, want.format)
		}
		if !regexp.MustCompile(`\b` + want.format + `\b`).MatchString(r["CAPTION"]) {
			t.Errorf("%s: caption %q does not name %s", want.name, r["CAPTION"], want.format)
		}
		m := embedding.FindStringSubmatch(r["EMBEDDING"])
		if m == nil {
			t.Errorf("%s: embedding %q, want four values and a dimension", want.name, r["EMBEDDING"])
		} else if n, _ := strconv.Atoi(m[2]); n < 16 {
			t.Errorf("%s: embedding dimension %d, want >= 16", want.name, n)
		}
	}
	for i, want := range []struct{ id, name, format, bytes string }{
		{"5", "no-image", "NULL", "-"}, {"6", "empty", "empty", "0"}, {"7", "garbage", "unknown", "12"}, {"8", "truncated.png", "PNG", "33"},
	} {
		r := results[4+i]
		got := []string{r["ID"], r["NAME"], r["FORMAT"], r["BYTES"], r["CAPTION"], r["EMBEDDING"]}
		if fmt.Sprint(got) != fmt.Sprint([]string{want.id, want.name, want.format, want.bytes, "NULL", "NULL"}) {
			t.Errorf("result row %v, want %s %s %s %s with NULL caption and embedding", got, want.id, want.name, want.format, want.bytes)
		}
	}
	// The sideways photo (40x30 stored, EXIF orientation 6) is described
	// upright; the HEIC is answered, converted to a JPEG.
	for i, want := range []struct{ id, name, format, caption string }{
		{"9", "sideways.jpg", "JPEG", "JPEG image, 30x40 pixels"}, {"10", "photo.heic", "HEIF", "JPEG image, 64x48 pixels"},
	} {
		r := results[8+i]
		if r["ID"] != want.id || r["NAME"] != want.name || r["FORMAT"] != want.format || !strings.HasPrefix(r["CAPTION"], want.caption) {
			t.Errorf("result row %v, want %s %s %s captioned %q", r, want.id, want.name, want.format, want.caption)
		}
		if embedding.FindStringSubmatch(r["EMBEDDING"]) == nil {
			t.Errorf("%s: embedding %q", want.name, r["EMBEDDING"])
		}
	}

	// One errors row per rule for each of the three bad values; none for NULL.
	var got []string
	for _, e := range table(t, out, "RULE") {
		got = append(got, strings.Join([]string{e["RULE"], e["ID"], e["REASON"], e["IMAGE_BYTES"]}, " "))
	}
	want := []string{
		"describe 6 empty_image 0", "embed 6 empty_image 0",
		"describe 7 unknown_format 12", "embed 7 unknown_format 12",
		"describe 8 provider_error 33", "embed 8 provider_error 33",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors rows:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(out, "3 per rule") || !strings.Contains(out, "The NULL image is no error") {
		t.Errorf("the output does not explain the errors rows")
	}
}

// TestDemoInterrupted stops the demo with SIGINT (Ctrl-C) while it runs and
// checks that it exits 1 and still removes its server and directory.
func TestDemoInterrupted(t *testing.T) {
	d := newDemoRun(t)
	pr, pw := io.Pipe()
	d.cmd.Stdout = pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := d.cmd.Wait()
		pw.Close()
		exited <- err
	}()
	// The header comes once the server runs and the rules exist; interrupt
	// right then, while the bridge starts.
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		d.stdout.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "pgimageai demo: a throwaway PostgreSQL") {
			if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(&d.stdout, pr) // ends when Wait closes pw
		close(copied)
	}()
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("pgimageai demo did not exit within 2m of SIGINT")
	}
	<-copied
	if err == nil {
		t.Fatal("pgimageai demo exited 0 after SIGINT, want 1")
	}
	d.skipWithoutPostgres(t)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("pgimageai demo: %v, want exit code 1", err)
	}
	if !strings.Contains(d.stderr.String(), "interrupted") {
		t.Errorf("stderr %q, want it to say interrupted", d.stderr.String())
	}
	d.assertCleanedUp(t)
}

// table parses the tabwriter table of out whose header starts with first:
// one map per row from column name to cell. Cells are separated by two or
// more spaces; the demo puts every cell on one line with single spaces.
func table(t testing.TB, out, first string) []map[string]string {
	t.Helper()
	sep := regexp.MustCompile(`\s{2,}`)
	var cols []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if cols == nil {
			if strings.HasPrefix(line, first+" ") {
				cols = sep.Split(strings.TrimSpace(line), -1)
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			break
		}
		cells := sep.Split(strings.TrimSpace(line), -1)
		if len(cells) != len(cols) {
			t.Fatalf("table %s: row %q has %d cells, want %d", first, line, len(cells), len(cols))
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = cells[i]
		}
		rows = append(rows, row)
	}
	if cols == nil {
		t.Fatalf("no table with header %s in the output", first)
	}
	return rows
}
