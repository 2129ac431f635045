package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/store"
	"github.com/pgimageai/pgimageai/store/storetest"
)

// TestStoreS3SeaweedFS runs the s3 kind against a real S3-compatible server
// (SeaweedFS, built from source by scripts/build-seaweedfs.sh, on 127.0.0.1):
// signed requests with keys from environment variables, Stat and Fetch,
// 404 as image_not_found, a new ETag after an overwrite, too_large by the
// size before the body, references outside the bucket or prefix refused.
func TestStoreS3SeaweedFS(t *testing.T) {
	w := storetest.StartWeed(t, "photos", "secrets")
	jpeg := append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, bytes.Repeat([]byte{0x42}, 200<<10)...)
	etag := w.Put(t, "photos", "app/2026/a.jpg", jpeg)
	w.Put(t, "photos", "app/big.jpg", bytes.Repeat([]byte{0xFF}, 3<<20))
	w.Put(t, "photos", "other/b.jpg", []byte("outside the prefix"))
	w.Put(t, "secrets", "app/a.jpg", []byte("another bucket"))
	keys := map[string]string{"WEED_KEY": w.AccessKey, "WEED_SECRET": w.SecretKey}
	open := func(t *testing.T, access, secret string) store.Store {
		st, err := store.Open(store.Config{Name: "weed", Kind: "s3", Endpoint: w.Endpoint, Bucket: "photos", Prefix: "app/",
			AccessKeyEnv: access, SecretKeyEnv: secret, Options: json.RawMessage(`{"path_style": true, "retries": 1, "timeout": "10s"}`)},
			store.Env{Getenv: func(k string) string {
				if v, ok := keys[k]; ok {
					return v
				}
				return "wrong-" + k
			}})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(t, "WEED_KEY", "WEED_SECRET")
	ctx := context.Background()

	info, err := st.Stat(ctx, "2026/a.jpg")
	if err != nil || info.Size != int64(len(jpeg)) || info.Version != etag {
		t.Fatalf("Stat = %+v, %v; want size %d, version %q", info, err, len(jpeg), etag)
	}
	for _, ref := range []string{"2026/a.jpg", "s3://photos/app/2026/a.jpg"} {
		body, finfo, err := st.Fetch(ctx, ref, 1<<20)
		if err != nil || !bytes.Equal(body, jpeg) || finfo != info {
			t.Errorf("Fetch(%q) = %d bytes, %+v, %v", ref, len(body), finfo, err)
		}
	}
	for ref, reason := range map[string]string{
		"missing.jpg":                    store.ReasonNotFound,
		"big.jpg":                        store.ReasonTooLarge,
		"s3://photos/other/b.jpg":        store.ReasonBadReference,
		"s3://secrets/app/a.jpg":         store.ReasonBadReference,
		"../other/b.jpg":                 store.ReasonBadReference,
		"%2e%2e/other/b.jpg":             store.ReasonBadReference,
		w.Endpoint + "/photos/app/a.jpg": store.ReasonBadReference,
	} {
		body, _, err := st.Fetch(ctx, ref, 1<<20)
		if store.ReasonOf(err) != reason || body != nil {
			t.Errorf("Fetch(%q) = %d bytes, %v; want %s", ref, len(body), err, reason)
		}
	}
	if _, err := st.Stat(ctx, "missing.jpg"); store.ReasonOf(err) != store.ReasonNotFound {
		t.Errorf("Stat(missing) = %v, want image_not_found", err)
	}

	// An overwrite gives a new ETag, and Fetch the new bytes.
	jpeg2 := append(append([]byte(nil), jpeg...), 0x43)
	etag2 := w.Put(t, "photos", "app/2026/a.jpg", jpeg2)
	info2, err := st.Stat(ctx, "2026/a.jpg")
	if err != nil || info2.Version == info.Version || info2.Version != etag2 || info2.Size != int64(len(jpeg2)) {
		t.Errorf("Stat after an overwrite = %+v, %v; before %+v", info2, err, info)
	}
	if body, _, err := st.Fetch(ctx, "2026/a.jpg", 1<<20); err != nil || !bytes.Equal(body, jpeg2) {
		t.Errorf("Fetch after an overwrite = %d bytes, %v", len(body), err)
	}
	w.Delete(t, "photos", "app/2026/a.jpg")
	if _, _, err := st.Fetch(ctx, "2026/a.jpg", 1<<20); store.ReasonOf(err) != store.ReasonNotFound {
		t.Errorf("Fetch after a delete = %v, want image_not_found", err)
	}

	// Wrong keys are the store's trouble (transient: rows park), not the row's.
	bad := open(t, "WEED_KEY", "NOT_THE_SECRET")
	if _, _, err := bad.Fetch(ctx, "big.jpg", 1<<20); !store.IsTransient(err) || strings.Contains(err.Error(), "wrong-NOT") {
		t.Errorf("Fetch with a wrong secret = %v, want transient without the secret", err)
	}
}
