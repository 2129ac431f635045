package engine

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/internal/pgconnect"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/sink"
)

func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }

// TestFetchBoundsTheImage reads a row's unchanged TOAST values as the
// template re-read does, against PostgreSQL: an image within the model's
// max_image_bytes comes back whole; one over it is never read — only its
// length and first 16 bytes come back, for the too_large row.
func TestFetchBoundsTheImage(t *testing.T) {
	db := integration.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgconnect.Connect(ctx, db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, title text);
INSERT INTO public.photos VALUES (1, '\x89504e470d0a1a0a' || pg_catalog.decode(pg_catalog.repeat('ab', 1990), 'hex'), 'small'),
  (2, '\x89504e470d0a1a0a' || pg_catalog.decode(pg_catalog.repeat('cd', 50000), 'hex'), 'big')`); err != nil {
		t.Fatal(err)
	}
	table, err := catalog.Lookup(ctx, conn, "photos")
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := provider.ParseOptions([]byte(`{"max_image_bytes": 2000}`))
	prompt := "Describe {{title}}"
	f, err := functions.Bind(functions.Complete, "m", struct{ provider.TextGenerator }{}, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	r := &rules.Rule{Config: rules.Config{Name: "r", ImageColumn: "img"}, Source: table, Fn: f, KeyColumns: []sink.KeyColumn{{Name: "id", TypeOID: 23}}}
	png := []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a}
	tests := []struct {
		name     string
		key      string
		wantOver bool
		wantSize int
	}{
		{name: "within max_image_bytes: read", key: `{"id": 1}`, wantSize: 1998},
		{name: "over max_image_bytes: not read", key: `{"id": 2}`, wantOver: true, wantSize: 50008},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := (&base{}).fetchOnce(ctx, conn, r, []byte(tt.key), []string{"title", "img"})
			if err != nil {
				t.Fatal(err)
			}
			img, _ := got.values["img"].([]byte)
			switch {
			case got.over != tt.wantOver:
				t.Errorf("over = %v, want %v", got.over, tt.wantOver)
			case tt.wantOver && (img != nil || got.size != tt.wantSize || len(got.head) != 16 || !bytes.HasPrefix(got.head, png)):
				t.Errorf("an image over the bound came back with %d bytes, size %d, head %x", len(img), got.size, got.head)
			case !tt.wantOver && (len(img) != tt.wantSize || !bytes.HasPrefix(img, png)):
				t.Errorf("image of %d bytes, want %d", len(img), tt.wantSize)
			}
		})
	}
}
