package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fileFixture lays out a root with the store's directory, a secret beside it
// (inside the root, outside the store) and one outside the root, and
// symlinks to each.
func fileFixture(t *testing.T) (root, dir string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	dir = filepath.Join(root, "photos")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(root, "other"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "a.jpg"), "AAAA")
	write(filepath.Join(dir, "sub", "b.jpg"), "BBBBBB")
	write(filepath.Join(dir, "big.jpg"), strings.Repeat("x", 1000))
	write(filepath.Join(root, "other", "secret.jpg"), "SECRET-IN-ROOT")
	write(filepath.Join(outside, "secret.jpg"), "SECRET-OUTSIDE")
	write(filepath.Join(dir, "locked.jpg"), "L")
	if err := os.Chmod(filepath.Join(dir, "locked.jpg"), 0); err != nil {
		t.Fatal(err)
	}
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(outside, "secret.jpg"), "out-abs.jpg")
	link("../../outside/secret.jpg", "out-rel.jpg")
	link("../other/secret.jpg", "sibling.jpg")
	link(outside, "outdir")
	link("a.jpg", "inside.jpg")
	link("sub", "subdir")
	link("loop1", "loop2")
	link("loop2", "loop1")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jpg"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

func TestFileStore(t *testing.T) {
	root, dir := fileFixture(t)
	st, err := Open(Config{Name: "f", Kind: "file", Prefix: dir}, Env{FileRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref    string
		want   string // the body when reason is ""
		reason string
	}{
		{"a.jpg", "AAAA", ""},
		{"sub/b.jpg", "BBBBBB", ""},
		{"inside.jpg", "AAAA", ""}, // a symlink that stays inside
		{"subdir/b.jpg", "BBBBBB", ""},
		{"file://" + dir + "/a.jpg", "AAAA", ""},
		{"missing.jpg", "", ReasonNotFound},
		{"a.jpg/x", "", ReasonNotFound},
		{"big.jpg", "", ReasonTooLarge},
		{"out-abs.jpg", "", ReasonBadReference}, // symlink out of the root
		{"out-rel.jpg", "", ReasonBadReference},
		{"sibling.jpg", "", ReasonBadReference}, // inside the root, outside the store
		{"outdir/secret.jpg", "", ReasonBadReference},
		{"loop1", "", ReasonBadReference},
		{"fifo.jpg", "", ReasonBadReference}, // never blocks on a FIFO
		{"sub", "", ReasonBadReference},      // a directory
		{"../other/secret.jpg", "", ReasonBadReference},
		{"%2e%2e/other/secret.jpg", "", ReasonBadReference},
		{dir + "/a.jpg", "", ReasonBadReference}, // an absolute path
		{"/etc/passwd", "", ReasonBadReference},
		{"file://" + root + "/other/secret.jpg", "", ReasonBadReference},
		{"file://host" + dir + "/a.jpg", "", ReasonBadReference},
		{"file://" + dir + "/../other/secret.jpg", "", ReasonBadReference},
	}
	if os.Geteuid() != 0 { // root reads a mode-0 file all the same
		tests = append(tests, struct{ ref, want, reason string }{"locked.jpg", "", ReasonForbidden})
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			body, info, err := st.Fetch(context.Background(), tt.ref, 100)
			if ReasonOf(err) != tt.reason {
				t.Fatalf("Fetch = %q, %v; want reason %q", body, err, tt.reason)
			}
			if tt.reason != "" {
				if body != nil {
					t.Errorf("a refused fetch returned %q", body)
				}
				return
			}
			if string(body) != tt.want || info.Size != int64(len(tt.want)) || info.Version == "" {
				t.Errorf("Fetch = %q, %+v", body, info)
			}
			sinfo, err := st.Stat(context.Background(), tt.ref)
			if err != nil || sinfo != info {
				t.Errorf("Stat = %+v, %v; Fetch said %+v", sinfo, err, info)
			}
		})
	}
}

func TestFileStoreVersionChanges(t *testing.T) {
	root, dir := fileFixture(t)
	st, err := Open(Config{Name: "f", Kind: "file", Prefix: dir}, Env{FileRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.Stat(context.Background(), "a.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("AAAAA"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := st.Stat(context.Background(), "a.jpg")
	if err != nil || after.Version == before.Version || after.Size != 5 {
		t.Errorf("after a rewrite: %+v, %v; before: %+v", after, err, before)
	}
}

func TestOpenFileStore(t *testing.T) {
	root, dir := fileFixture(t)
	outside := filepath.Join(filepath.Dir(root), "outside")
	tests := []struct {
		name string
		cfg  Config
		env  Env
		err  string
	}{
		{"no roots", Config{Kind: "file", Prefix: dir}, Env{}, "--file-root"},
		{"relative prefix", Config{Kind: "file", Prefix: "photos"}, Env{FileRoots: []string{root}}, "absolute directory"},
		{"outside every root", Config{Kind: "file", Prefix: outside}, Env{FileRoots: []string{root}}, "under no --file-root"},
		{"through a symlink out", Config{Kind: "file", Prefix: filepath.Join(dir, "outdir")}, Env{FileRoots: []string{root}}, "under no --file-root"},
		{"climbing out", Config{Kind: "file", Prefix: dir + "/../../outside"}, Env{FileRoots: []string{root}}, "under no --file-root"},
		{"a file", Config{Kind: "file", Prefix: filepath.Join(dir, "a.jpg")}, Env{FileRoots: []string{root}}, "not a directory"},
		{"missing", Config{Kind: "file", Prefix: filepath.Join(dir, "nope")}, Env{FileRoots: []string{root}}, "no such file"},
		{"a bucket", Config{Kind: "file", Prefix: dir, Bucket: "b"}, Env{FileRoots: []string{root}}, "only a prefix"},
		{"an s3 option", Config{Kind: "file", Prefix: dir, Options: json.RawMessage(`{"path_style":true}`)}, Env{FileRoots: []string{root}}, "applies only to s3"},
		{"root itself", Config{Kind: "file", Prefix: root}, Env{FileRoots: []string{root}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.cfg, tt.env)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Open = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

// TestFileStoreSymlinkSwap replaces a checked file by a symlink out of the
// root: whichever way the race goes, the secret is never read.
func TestFileStoreSymlinkSwap(t *testing.T) {
	root, dir := fileFixture(t)
	st, err := Open(Config{Name: "f", Kind: "file", Prefix: dir}, Env{FileRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(filepath.Dir(root), "outside", "secret.jpg")
	swap := filepath.Join(dir, "swap.jpg")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			os.Remove(swap)
			if i%2 == 0 {
				os.WriteFile(swap, []byte("SAFE"), 0o644)
			} else {
				os.Symlink(target, swap)
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		body, _, err := st.Fetch(context.Background(), "swap.jpg", 100)
		if strings.Contains(string(body), "SECRET") {
			t.Fatalf("read the secret through a swapped symlink: %q, %v", body, err)
		}
	}
}
