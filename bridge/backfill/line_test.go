package backfill

import (
	"bytes"
	"context"
	"image/jpeg"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/normalize/normtest"
	"github.com/pgimageai/pgimageai/provider"
)

// charger records what a batch line charges to the byte budget.
type charger struct{ held, peak, acquired int64 }

func (c *charger) Acquire(_ context.Context, n int64) error {
	c.held += n
	c.acquired += n
	c.peak = max(c.peak, c.held)
	return nil
}
func (c *charger) Release(n int64) { c.held -= n }

// lineAPI is the part of a batch API that builds a line; it records the
// budget held while it runs.
type lineAPI struct {
	provider.BatchAPI
	c        *charger
	heldThen int64
	got      provider.Image
}

func (a *lineAPI) BatchLine(id string, img provider.Image, prompt string) ([]byte, error) {
	a.heldThen, a.got = a.c.held, img
	return []byte(`{"custom_id":"` + id + `"}`), nil
}

// TestBatchLineChargesNormalisation: a batch line carries the image as the
// synchronous call sends it (normalised: a sideways 12 MP-like JPEG goes
// upright and smaller), and the normalisation's memory is held in the byte
// budget while it runs, then given back.
func TestBatchLineChargesNormalisation(t *testing.T) {
	opts, _ := provider.ParseOptions(nil)
	var p provider.Provider = struct{ provider.TextGenerator }{}
	prompt := "p"
	fn, err := functions.Bind(functions.Complete, "m", p, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	r := &rules.Rule{Config: rules.Config{Name: "r", Model: "m"}, Fn: fn}
	c := &charger{}
	api := &lineAPI{c: c}
	b := &batchRun{r: r, api: api, budget: c}
	img := normtest.SidewaysJPEG(t, 2016, 1512)
	line, err := b.line(context.Background(), work.KeyFor(r, prompt, img), Row{KeyJSON: []byte(`{"id": 1}`), Img: img, Prompt: prompt})
	if err != nil || line == nil {
		t.Fatalf("line = %q, %v", line, err)
	}
	want := fn.CallMemory(img)
	if want <= 0 || c.acquired != want || api.heldThen < want || c.held != 0 {
		t.Errorf("charged %d (held %d while the line was built, %d after), want %d held during and none after", c.acquired, api.heldThen, c.held, want)
	}
	// Normalised: turned upright (the stored JPEG is 2016x1512 with EXIF
	// orientation 6), so 1512 wide and 2016 high, and re-encoded without
	// the orientation tag.
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(api.got.Data))
	if err != nil || api.got.MIME != "image/jpeg" || cfg.Width != 1512 || cfg.Height != 2016 || bytes.Equal(api.got.Data, img) {
		t.Errorf("the line's image: %d bytes of %s, %dx%d (%v), want the normalised JPEG, upright 1512x2016", len(api.got.Data), api.got.MIME, cfg.Width, cfg.Height, err)
	}
}
