package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fileStore reads files under dir, a directory inside one of the
// operator's roots (--file-root). Every read resolves the path, checks that
// it stays under dir, then opens it through an os.Root of dir (the kernel's
// RESOLVE_BENEATH or a walk with O_NOFOLLOW: no symlink, "..", or a race
// between the check and the open leaves it), refuses anything but a regular
// file, and checks after the open that it is the file it checked.
type fileStore struct {
	name string
	root string // the operator's root the directory lies under (resolved)
	dir  string // the store's directory, resolved, under root
	opts Options
	lim  *limiter
}

func openFile(cfg Config, env Env, o Options) (*fileStore, error) {
	if cfg.Endpoint != "" || cfg.Bucket != "" || cfg.Region != "" || cfg.AccessKeyEnv != "" || cfg.SecretKeyEnv != "" {
		return nil, errors.New("a file store takes only a prefix (its directory) and options")
	}
	if len(env.FileRoots) == 0 {
		return nil, errors.New("file stores need a root the operator allows (--file-root DIR)")
	}
	if cfg.Prefix == "" || !filepath.IsAbs(cfg.Prefix) {
		return nil, fmt.Errorf("prefix %q: a file store's prefix is an absolute directory under a --file-root", cfg.Prefix)
	}
	dir, err := filepath.EvalSymlinks(filepath.Clean(cfg.Prefix))
	if err != nil {
		return nil, fmt.Errorf("prefix %q: %w", cfg.Prefix, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("prefix %q: %w", cfg.Prefix, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("prefix %q is not a directory", cfg.Prefix)
	}
	for _, r := range env.FileRoots {
		root, err := filepath.EvalSymlinks(filepath.Clean(r))
		if err != nil || !filepath.IsAbs(root) {
			continue
		}
		if within(root, dir) {
			return &fileStore{name: cfg.Name, root: root, dir: dir, opts: o, lim: newLimiter(o)}, nil
		}
	}
	return nil, fmt.Errorf("prefix %q (%s) is under no --file-root (%s)", cfg.Prefix, dir, strings.Join(env.FileRoots, ", "))
}

// within reports whether path is dir or lies under it (both clean, absolute).
func within(dir, path string) bool {
	if path == dir {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// rel checks a reference and returns it as a path relative to dir.
func (s *fileStore) rel(ref string) (string, error) {
	key := ref
	if rest, ok := strings.CutPrefix(ref, "file://"); ok {
		if !strings.HasPrefix(rest, "/") {
			return "", badRef("file URL %q names a host", clip(ref))
		}
		if !within(s.dir, filepath.Clean(rest)) || filepath.Clean(rest) == s.dir {
			return "", badRef("%q is not under the store's directory", clip(ref))
		}
		key = strings.TrimPrefix(filepath.Clean(rest), s.dir+"/")
	}
	if e := checkKey(key, false); e != nil {
		return "", e
	}
	return filepath.Clean(key), nil
}

// open resolves, checks, opens and re-checks; the caller closes the file.
func (s *fileStore) open(ref string) (*os.File, os.FileInfo, error) {
	rel, err := s.rel(ref)
	if err != nil {
		return nil, nil, err
	}
	full := filepath.Join(s.dir, rel)
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		return nil, nil, fileError(err)
	}
	if !within(s.dir, resolved) || resolved == s.dir {
		return nil, nil, badRef("%q resolves to %q, outside the store's directory", clip(ref), resolved)
	}
	if !within(s.root, resolved) {
		return nil, nil, badRef("%q resolves outside the file root", clip(ref))
	}
	before, err := os.Lstat(resolved)
	if err != nil {
		return nil, nil, fileError(err)
	}
	if !before.Mode().IsRegular() {
		return nil, nil, badRef("%q is not a regular file (%s)", clip(ref), before.Mode().Type())
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, nil, transient(fmt.Errorf("opening the store's directory: %w", err))
	}
	defer root.Close()
	relResolved, err := filepath.Rel(s.dir, resolved)
	if err != nil {
		return nil, nil, badRef("%v", err)
	}
	// O_NOFOLLOW: the path was resolved above; a symlink put in its place
	// since is refused. O_NONBLOCK: a FIFO swapped in never blocks the open.
	f, err := root.OpenFile(relResolved, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, badRef("%q became a symlink", clip(ref))
		}
		return nil, nil, fileError(err)
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fileError(err)
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return nil, nil, badRef("%q changed between its check and its open", clip(ref))
	}
	return f, after, nil
}

func fileVersion(st os.FileInfo) string {
	return strconv.FormatInt(st.ModTime().UnixNano(), 36) + "-" + strconv.FormatInt(st.Size(), 36)
}

func fileError(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return &Error{Reason: ReasonNotFound, Err: err}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Reason: ReasonForbidden, Err: err}
	case errors.Is(err, syscall.ELOOP), strings.Contains(err.Error(), "too many links"), strings.Contains(err.Error(), "escapes"):
		return badRef("%v", err)
	}
	return transient(err)
}

func (s *fileStore) Stat(ctx context.Context, ref string) (Info, error) {
	var info Info
	err := s.lim.do(ctx, func(ctx context.Context) error {
		f, st, err := s.open(ref)
		if err != nil {
			return err
		}
		f.Close()
		info = Info{Size: st.Size(), Version: fileVersion(st)}
		return nil
	})
	return info, err
}

func (s *fileStore) Fetch(ctx context.Context, ref string, maxBytes int64) ([]byte, Info, error) {
	limit := effectiveLimit(maxBytes, s.opts)
	var body []byte
	var info Info
	err := s.lim.do(ctx, func(ctx context.Context) error {
		f, st, err := s.open(ref)
		if err != nil {
			return err
		}
		defer f.Close()
		info = Info{Size: st.Size(), Version: fileVersion(st)}
		if info.Size > limit {
			return tooLarge(info.Size, limit)
		}
		// A file that grows while it is read is cut at limit+1 bytes; one
		// that changed size since its stat is a transient error.
		body, err = readBounded(f, info.Size, limit)
		return err
	})
	return body, info, err
}
