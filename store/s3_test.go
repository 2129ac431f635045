package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fakeS3 is gofakes3 in process behind a fault injector: fault, when it
// answers true, has written the response itself.
type fakeS3 struct {
	*httptest.Server
	backend  *s3mem.Backend
	requests atomic.Int64
	read     atomic.Int64 // bytes the store's connections read
}

func newFakeS3(t *testing.T, fault func(n int64, w http.ResponseWriter, r *http.Request) bool) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New()}
	if err := f.backend.CreateBucket("photos"); err != nil {
		t.Fatal(err)
	}
	s3h := gofakes3.New(f.backend).Server()
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.requests.Add(1)
		if testing.Verbose() {
			t.Logf("fake S3: %d %s %s", n, r.Method, r.URL.Path)
		}
		if fault != nil && fault(n, w, r) {
			return
		}
		s3h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeS3) put(t *testing.T, key string, body []byte) {
	t.Helper()
	if _, err := f.backend.PutObject("photos", key, map[string]string{}, bytes.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (f *fakeS3) open(t *testing.T, options string) Store {
	t.Helper()
	st, err := Open(Config{Name: "s", Kind: "s3", Endpoint: f.URL, Bucket: "photos", Prefix: "app",
		AccessKeyEnv: "TEST_S3_KEY", SecretKeyEnv: "TEST_S3_SECRET", Options: json.RawMessage(options)},
		Env{
			Getenv: func(k string) string {
				return map[string]string{"TEST_S3_KEY": "AKIDTEST", "TEST_S3_SECRET": "secret"}[k]
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &f.read}, nil
			},
		})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func s3Fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

func TestS3Store(t *testing.T) {
	big := bytes.Repeat([]byte{0xFF}, 4<<20)
	f := newFakeS3(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/photos/app/down.jpg":
			s3Fail(w, http.StatusServiceUnavailable, "SlowDown")
		case "/photos/app/throttled.jpg":
			s3Fail(w, http.StatusTooManyRequests, "TooManyRequests")
		case "/photos/app/denied.jpg":
			s3Fail(w, http.StatusForbidden, "AccessDenied")
		case "/photos/app/badcreds.jpg":
			s3Fail(w, http.StatusForbidden, "InvalidAccessKeyId")
		case "/photos/app/huge.jpg":
			w.Header().Set("Content-Length", strconv.FormatInt(10<<30, 10))
			w.Header().Set("ETag", `"x"`)
			w.WriteHeader(http.StatusOK)
			w.Write(big[:64<<10])
		case "/photos/app/truncated.jpg":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			w.Write(big[:400])
			panic(http.ErrAbortHandler)
		case "/photos/app/slow.jpg":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			w.Write(big[:10])
			w.(http.Flusher).Flush()
			time.Sleep(400 * time.Millisecond)
			w.Write(big[:990])
		default:
			return false
		}
		return true
	})
	f.put(t, "app/a.jpg", []byte("JPEG-A"))
	f.put(t, "app/2026/b.jpg", []byte("JPEG-B"))
	f.put(t, "app/big.jpg", big)
	f.put(t, "other/secret.jpg", []byte("SECRET"))
	st := f.open(t, `{"path_style": true, "retries": 1, "timeout": "250ms"}`)
	tests := []struct {
		ref    string
		want   string
		reason string
	}{
		{"a.jpg", "JPEG-A", ""},
		{"2026/b.jpg", "JPEG-B", ""},
		{"s3://photos/app/a.jpg", "JPEG-A", ""},
		{"missing.jpg", "", ReasonNotFound},
		{"denied.jpg", "", ReasonForbidden},
		{"badcreds.jpg", "", ReasonStoreUnavailable}, // the store's keys, not the row's object
		{"down.jpg", "", ReasonStoreUnavailable},
		{"throttled.jpg", "", ReasonStoreUnavailable},
		{"truncated.jpg", "", ReasonStoreUnavailable},
		{"slow.jpg", "", ReasonStoreUnavailable},
		{"big.jpg", "", ReasonTooLarge},
		{"huge.jpg", "", ReasonTooLarge},
		{"s3://photos/other/secret.jpg", "", ReasonBadReference},
		{"s3://secrets/app/a.jpg", "", ReasonBadReference},
		{"../other/secret.jpg", "", ReasonBadReference},
		{"%2e%2e/other/secret.jpg", "", ReasonBadReference},
		{"/other/secret.jpg", "", ReasonBadReference},
		{f.URL + "/photos/other/secret.jpg", "", ReasonBadReference},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			reqs, read := f.requests.Load(), f.read.Load()
			body, info, err := st.Fetch(context.Background(), tt.ref, 1<<20)
			if ReasonOf(err) != tt.reason {
				t.Fatalf("Fetch = %q, %v; want reason %q", body, err, tt.reason)
			}
			if (tt.reason == ReasonStoreUnavailable) != IsTransient(err) {
				t.Errorf("transient = %v for %v", IsTransient(err), err)
			}
			switch tt.reason {
			case "":
				if string(body) != tt.want || info.Size != int64(len(tt.want)) || info.Version == "" {
					t.Errorf("Fetch = %q, %+v", body, info)
				}
			case ReasonBadReference:
				if n := f.requests.Load() - reqs; n != 0 {
					t.Errorf("%d requests for a bad reference", n)
				}
			case ReasonTooLarge:
				// Refused by its size: the body is never read (what the
				// connection took in is its headers and what the kernel
				// had buffered, far below the object).
				if n := f.read.Load() - read; n > 512<<10 {
					t.Errorf("read %d bytes of a refused object", n)
				}
			case ReasonStoreUnavailable:
				// retries 1: two attempts (Go's transport may send one of
				// them again itself when a kept-alive connection had died).
				if n := f.requests.Load() - reqs; n < 2 || n > 3 {
					t.Errorf("%d requests, want 2 (retries 1)", n)
				}
			}
		})
	}
	t.Run("stat", func(t *testing.T) {
		info, err := st.Stat(context.Background(), "big.jpg")
		if err != nil || info.Size != int64(len(big)) || info.Version == "" {
			t.Errorf("Stat = %+v, %v", info, err)
		}
		if _, err := st.Stat(context.Background(), "missing.jpg"); ReasonOf(err) != ReasonNotFound {
			t.Errorf("Stat(missing) = %v", err)
		}
		if _, err := st.Stat(context.Background(), "down.jpg"); !IsTransient(err) {
			t.Errorf("Stat(down) = %v", err)
		}
	})
}

func TestS3StoreVersionChanges(t *testing.T) {
	f := newFakeS3(t, nil)
	f.put(t, "app/a.jpg", []byte("one"))
	st := f.open(t, `{"path_style": true}`)
	ctx := context.Background()
	v1, err := st.Stat(ctx, "a.jpg")
	if err != nil {
		t.Fatal(err)
	}
	body, fv1, err := st.Fetch(ctx, "a.jpg", 100)
	if err != nil || string(body) != "one" || fv1.Version != v1.Version {
		t.Fatalf("Fetch = %q, %+v, %v; Stat said %+v", body, fv1, err, v1)
	}
	f.put(t, "app/a.jpg", []byte("two!"))
	v2, err := st.Stat(ctx, "a.jpg")
	if err != nil || v2.Version == v1.Version || v2.Size != 4 {
		t.Errorf("after an overwrite: %+v, %v; before: %+v", v2, err, v1)
	}
	if body, _, _ := st.Fetch(ctx, "a.jpg", 100); string(body) != "two!" {
		t.Errorf("Fetch after an overwrite = %q", body)
	}
}

func TestS3StoreRecoversAfterTransientFailure(t *testing.T) {
	f := newFakeS3(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			s3Fail(w, http.StatusInternalServerError, "InternalError")
			return true
		}
		return false
	})
	f.put(t, "app/a.jpg", []byte("JPEG"))
	st := f.open(t, `{"path_style": true, "retries": 2}`)
	body, _, err := st.Fetch(context.Background(), "a.jpg", 100)
	if err != nil || string(body) != "JPEG" || f.requests.Load() != 2 {
		t.Errorf("Fetch = %q, %v after %d requests", body, err, f.requests.Load())
	}
}

func TestS3StoreMissingBucketIsTransient(t *testing.T) {
	f := newFakeS3(t, nil)
	st, err := Open(Config{Name: "s", Kind: "s3", Endpoint: f.URL, Bucket: "nope", AccessKeyEnv: "K", SecretKeyEnv: "S",
		Options: json.RawMessage(`{"path_style": true, "retries": 0}`)},
		Env{Getenv: func(string) string { return "x" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Fetch(context.Background(), "a.jpg", 100); !IsTransient(err) {
		t.Errorf("Fetch from a missing bucket = %v, want transient (the store's configuration, not the row)", err)
	}
}

// TestS3StoreDefaultCredentialChain: with both key variables NULL the SDK's
// chain finds the keys (here in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY;
// the instance metadata service is switched off so that nothing leaves
// loopback).
func TestS3StoreDefaultCredentialChain(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDCHAIN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "chain-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	var auth atomic.Value
	f := newFakeS3(t, func(n int64, w http.ResponseWriter, r *http.Request) bool {
		auth.Store(r.Header.Get("Authorization"))
		return false
	})
	f.put(t, "a.jpg", []byte("JPEG"))
	st, err := Open(Config{Name: "s", Kind: "s3", Endpoint: f.URL, Bucket: "photos", Options: json.RawMessage(`{"path_style": true}`)}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if body, _, err := st.Fetch(context.Background(), "a.jpg", 100); err != nil || string(body) != "JPEG" {
		t.Fatalf("Fetch = %q, %v", body, err)
	}
	if a, _ := auth.Load().(string); !strings.Contains(a, "Credential=AKIDCHAIN/") {
		t.Errorf("signed with %q, want the chain's key", a)
	}
}

func TestOpenS3Store(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"no bucket", Config{Kind: "s3"}, "needs a bucket"},
		{"one key variable", Config{Kind: "s3", Bucket: "b", AccessKeyEnv: "K"}, "go together"},
		{"unset variable", Config{Kind: "s3", Bucket: "b", AccessKeyEnv: "NOPE_K", SecretKeyEnv: "NOPE_S"}, "NOPE_K is not set"},
		{"endpoint not a URL", Config{Kind: "s3", Bucket: "b", Endpoint: "minio:9000", AccessKeyEnv: "K", SecretKeyEnv: "S"}, "want an http:// or https:// URL"},
		{"endpoint with keys", Config{Kind: "s3", Bucket: "b", Endpoint: "https://k:s@minio:9000", AccessKeyEnv: "K", SecretKeyEnv: "S"}, "no user information"},
		{"bad prefix", Config{Kind: "s3", Bucket: "b", Prefix: "a/../b"}, `".." segment`},
		{"http option", Config{Kind: "s3", Bucket: "b", Options: json.RawMessage(`{"allow_http": true}`)}, "applies only to http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.cfg, Env{Getenv: func(k string) string {
				if k == "K" || k == "S" {
					return "x"
				}
				return ""
			}})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Open = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
