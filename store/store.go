// Package store reads images by reference: an object in S3-compatible storage
// (AWS S3, MinIO, Ceph, R2, GCS's S3 interoperability), a path under an HTTP(S)
// base URL, a file under a directory the operator allows, or a PostgreSQL large
// object. It owns the safety of those reads: a reference can never leave its
// store (another bucket, host or directory, "..", a symlink out of a root, a
// private address), and every body is bounded by bytes before it is read.
//
// A Store is opened from one row of pgimageai.stores (Config) and the
// operator's environment (Env). It is safe for concurrent use and limits its
// own concurrency (the max_concurrency option). Errors are *Error values with
// a SPEC §3 reason; Transient ones (timeouts, 5xx, 429, resets) park rows like
// a provider outage rather than fail them.
//
// The package imports nothing of the bridge: the bridge calls Stat and Fetch.
//
// Layer: store.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/pgimageai/pgimageai/internal/suggest"
)

// Reasons of an *Error, as SPEC §3 names them.
const (
	ReasonBadReference     = "bad_reference"     // outside the store, unparseable, or an address the store does not allow
	ReasonNotFound         = "image_not_found"   // 404, NoSuchKey, ENOENT
	ReasonForbidden        = "image_forbidden"   // 403, AccessDenied, EACCES
	ReasonTooLarge         = "too_large"         // larger than maxBytes, by its size or by its body
	ReasonStoreUnavailable = "store_unavailable" // transient: timeouts, 5xx, 429, resets
)

// Info is what a store says about an object without reading its body.
type Info struct {
	Size    int64  // bytes; -1 when the store did not say (an http server without Content-Length)
	Version string // ETag or version id; "" when the store has none (file: mtime and size)
}

// Store reads objects by reference. A reference is a key relative to the
// store, or an absolute s3://bucket/key or URL that must fall inside it.
// When ctx ends, Stat and Fetch return ctx's error, not an *Error.
type Store interface {
	// Stat returns the object's size and version, without its body (HEAD, stat).
	Stat(ctx context.Context, ref string) (Info, error)
	// Fetch returns the object's body, at most maxBytes of it: an object whose
	// size exceeds maxBytes is refused before its body is read, and a body
	// that runs past maxBytes (or past its announced size) is cut and refused.
	Fetch(ctx context.Context, ref string, maxBytes int64) ([]byte, Info, error)
}

// Error is every error of a Store: a reason of SPEC §3 and, for transient
// failures, Transient = true (Reason is then ReasonStoreUnavailable).
type Error struct {
	Reason    string
	Transient bool
	Err       error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason of a store error in err's chain, or "".
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// IsTransient reports whether err's chain holds a transient store error.
func IsTransient(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Transient
}

// Config is one row of pgimageai.stores.
type Config struct {
	Name, Kind, Endpoint, Region, Bucket, Prefix, AccessKeyEnv, SecretKeyEnv string
	Options                                                                  json.RawMessage
}

// Env is what the operator's process gives every store: the directories a
// file store may read under (--file-root), the environment, and hooks that
// tests use to watch or replace the network.
//
// Getenv is the only way a store reads a key: the caller enforces which
// variables a store may name (--key-env-allow) by the Getenv it passes. The
// s3 kind's default credential chain (both key columns NULL) reads the AWS
// SDK's own variables and files, as AWS users expect.
type Env struct {
	FileRoots []string            // absolute directories; a file store's prefix must lie under one
	Getenv    func(string) string // nil = os.Getenv
	// LookupIP resolves an http store's host names; nil = net.DefaultResolver.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
	// Dial makes every connection; nil = a net.Dialer. For an http store
	// addr is always an IP:port that passed its address checks; for an s3
	// store it is the endpoint's host:port.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Open returns the store that cfg describes, or an error naming what is wrong
// with it (an unknown kind or option, a missing bucket, a prefix outside every
// file root).
// Open reads no object and resolves no host: a store that cannot be reached
// shows at its first Stat or Fetch (and in pgimageai doctor).
func Open(cfg Config, env Env) (Store, error) {
	st, err := open(cfg, env)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", cfg.Name, err)
	}
	return st, nil
}

// Kinds are the kinds of store Open knows.
var Kinds = []string{"s3", "http", "file"}

func open(cfg Config, env Env) (Store, error) {
	switch cfg.Kind {
	case "s3", "http", "file":
	default:
		return nil, fmt.Errorf("unknown kind %q%s; known: s3, http, file", cfg.Kind, suggest.Hint(cfg.Kind, Kinds))
	}
	o, err := parseOptions(cfg.Kind, cfg.Options)
	if err != nil {
		return nil, err
	}
	switch cfg.Kind {
	case "s3":
		return openS3(cfg, env, o)
	case "http":
		return openHTTP(cfg, env, o)
	default:
		return openFile(cfg, env, o)
	}
}
