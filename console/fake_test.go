package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// fakeSource is a Source with function fields; writes counts the calls that
// change state (Retry), reads every other call.
type fakeSource struct {
	overview  func() Overview
	results   func(rule string, q ResultQuery) (ResultPage, error)
	similar   func(rule, key string) ([]Result, error)
	errs      []state.ConsoleError
	image     func(rule, key string) ([]byte, error)
	retried   atomic.Int64
	reads     atomic.Int64
	lastRetry atomic.Value // RetryRequest
}

func (f *fakeSource) Overview(context.Context) (Overview, error) {
	f.reads.Add(1)
	if f.overview != nil {
		return f.overview(), nil
	}
	return Overview{At: time.Now()}, nil
}

func (f *fakeSource) Results(_ context.Context, rule string, q ResultQuery) (ResultPage, error) {
	f.reads.Add(1)
	if f.results != nil {
		return f.results(rule, q)
	}
	return ResultPage{}, ErrNoRule
}

func (f *fakeSource) Similar(_ context.Context, rule, key string, _ int) ([]Result, error) {
	if f.similar != nil {
		return f.similar(rule, key)
	}
	return nil, ErrNoSimilar
}

func (f *fakeSource) Errors(context.Context, string, string, int) ([]state.ConsoleError, int64, error) {
	f.reads.Add(1)
	return f.errs, int64(len(f.errs)), nil
}

func (f *fakeSource) Image(_ context.Context, rule, key string, have func([32]byte) bool) (ImageRead, error) {
	f.reads.Add(1)
	if f.image == nil {
		return ImageRead{}, ErrNoImage
	}
	b, err := f.image(rule, key)
	if err != nil {
		return ImageRead{}, err
	}
	r := ImageRead{Sum: sha256.Sum256(b), Size: int64(len(b))}
	if !have(r.Sum) {
		r.Bytes = b
	}
	return r, nil
}

func (f *fakeSource) ErrorCounts(context.Context) ([]state.ErrorCount, error) {
	counts := map[string]int64{}
	var out []state.ErrorCount
	for _, e := range f.errs {
		k := e.Rule + "\x00" + string(e.Reason)
		if counts[k] == 0 {
			out = append(out, state.ErrorCount{Rule: e.Rule, Reason: e.Reason})
		}
		counts[k]++
	}
	for i := range out {
		out[i].Count = counts[out[i].Rule+"\x00"+string(out[i].Reason)]
	}
	return out, nil
}

func (f *fakeSource) CallsToday(context.Context) (map[string]int64, error) { return nil, nil }

func (f *fakeSource) CountRetryable(_ context.Context, req RetryRequest) (int64, error) {
	if req.Key != "" {
		return 1, nil
	}
	return 3, nil
}

func (f *fakeSource) Retry(_ context.Context, req RetryRequest) (replication.LSN, error) {
	f.retried.Add(1)
	f.lastRetry.Store(req)
	return 0x16B3748, nil
}

// testJPEG is a real w × h JPEG.
func testJPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func keyJSON(id int) string {
	b, _ := json.Marshal(map[string]int{"id": id})
	return string(b)
}
