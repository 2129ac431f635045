package store

import (
	"context"
	"net/http"
	"os"
	"testing"
)

func TestPing(t *testing.T) {
	f := newFakeS3(t, nil)
	good := f.open(t, `{"path_style": true}`)
	down := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) })
	up := newOrigin(t, func(o *origin, w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	root, dir := fileFixture(t)
	fileStore, err := Open(Config{Kind: "file", Prefix: dir}, Env{FileRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	missingBucket, err := Open(Config{Kind: "s3", Endpoint: f.URL, Bucket: "nope", AccessKeyEnv: "K", SecretKeyEnv: "S", Options: []byte(`{"path_style": true, "retries": 0}`)},
		Env{Getenv: func(string) string { return "x" }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		st        Store
		transient bool // false = no error
	}{
		{"s3", good, false},
		{"s3 without its bucket", missingBucket, true},
		{"http answering 404 at its base", openHTTPTest(t, newNetHooks(), up.URL+"/", `{"allow_private": true, "allow_http": true}`), false},
		{"http answering 503", openHTTPTest(t, newNetHooks(), down.URL+"/", `{"allow_private": true, "allow_http": true, "retries": 0}`), true},
		{"file", fileStore, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.st.(Pinger).Ping(context.Background())
			if (err != nil) != tt.transient || (err != nil && !IsTransient(err)) {
				t.Errorf("Ping = %v, want transient=%v", err, tt.transient)
			}
			if err := tt.st.(Closer).Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
		})
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := fileStore.(Pinger).Ping(context.Background()); !IsTransient(err) {
		t.Errorf("Ping of a removed directory = %v, want transient", err)
	}
	private := openHTTPTest(t, newNetHooks(), up.URL+"/", `{"allow_http": true}`)
	if err := private.(Pinger).Ping(context.Background()); !IsTransient(err) {
		t.Errorf("Ping of a store at a refused address = %v, want transient", err)
	}
}
