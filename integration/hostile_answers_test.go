package integration_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider/local"
)

// TestHostileAnswersAndImages: an OpenAI-compatible server answering with a
// 600 MB content is read no further than the chat bound and leaves a
// bad_response row, not a 629,145,600-character caption; the 50,000,000 × 1
// PNG strip (48 KB) is too_large for the local provider, before decoding.
func TestHostileAnswersAndImages(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	var written atomic.Int64
	ai.SetHook(func(w http.ResponseWriter, r *http.Request, req aiRequest) bool {
		w.Header().Set("Content-Type", "application/json")
		n, err := io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`)
		written.Add(int64(n))
		chunk := strings.Repeat("a", 32<<10)
		for total := int64(n); err == nil && total < 600<<20; total += int64(n) {
			n, err = io.WriteString(w, chunk)
			written.Add(int64(n))
		}
		return true
	})
	// normalize off: the strip is sent as stored, to get the huge answer (normalised, its
	// decode would pass normalize_max_decoded_bytes: too_large, no request).
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('huge', 'openai', $1, 'gpt-test', '{"normalize": false}'), ('loc', 'local', NULL, 'x', '{}')`, ai.BaseURL())
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('huge', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'huge', 'Describe', 'public.out', 'caption'),
  ('strip', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'loc', 'Describe', 'public.out', 'described')`)
	cfg := s.config(t)
	cfg.Registry.Register("local", local.Factory)
	s.start(t, cfg)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", stripPNG(t, 50_000_000))
	s.sync(t, 60*time.Second)

	for _, want := range []struct{ rule, reason, detail string }{
		{"huge", "bad_response", "answer larger than 2097152 bytes"},
		{"strip", "too_large", "PNG image of 50000000x1 pixels: its side of 50000000 pixels is over the limit of 16384 (option max_side); not decoded"},
	} {
		var reason, detail string
		err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors WHERE rule = $1 AND resolved_at IS NULL`, want.rule).Scan(&reason, &detail)
		if err != nil || reason != want.reason || !strings.Contains(detail, want.detail) {
			t.Errorf("rule %s: %s %q (%v), want %s containing %q", want.rule, reason, detail, err, want.reason, want.detail)
		}
	}
	var caption, described *string
	if err := s.conn.QueryRow(context.Background(), "SELECT caption, described FROM public.out WHERE id = 1").Scan(&caption, &described); err != nil || caption != nil || described != nil {
		t.Errorf("target row: %v, %v (%v); want NULL results", caption, described, err)
	}
	if n := ai.Count(); n != 1 {
		t.Errorf("%d requests for the huge answer, want 1 (a bad_response is not retried)", n)
	}
	t.Logf("the server wrote %d of %d bytes", written.Load(), 600<<20)
	if w := written.Load(); w > 64<<20 {
		t.Errorf("the server wrote %d bytes: the answer was read past its bound", w)
	}
}

// stripPNG returns a w × 1 8-bit grey PNG, compressed (a 50,000,000-pixel
// strip is 48 KB).
func stripPNG(t testing.TB, w int) []byte {
	t.Helper()
	var out, idat bytes.Buffer
	chunk := func(typ string, data []byte) {
		binary.Write(&out, binary.BigEndian, uint32(len(data)))
		c := append([]byte(typ), data...)
		out.Write(c)
		binary.Write(&out, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	out.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], 1)
	ihdr[8] = 8 // grey, 8 bits
	chunk("IHDR", ihdr)
	z := zlib.NewWriter(&idat)
	z.Write([]byte{0})
	zero := make([]byte, 1<<20)
	for left := w; left > 0; left -= len(zero) {
		z.Write(zero[:min(left, len(zero))])
	}
	z.Close()
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// TestHostileAnswerPeakRSS: `pgimageai run` with a 32 MiB byte budget asks a
// provider that answers 600 MB for each of 4 rows at once: 4 bad_response
// rows, and the process's peak RSS stays under budget + 64 MiB.
func TestHostileAnswerPeakRSS(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.SetHook(func(w http.ResponseWriter, r *http.Request, req aiRequest) bool {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`)
		chunk := strings.Repeat("a", 32<<10)
		for total := 0; err == nil && total < 600<<20; total += len(chunk) {
			_, err = io.WriteString(w, chunk)
		}
		return true
	})
	s.model(t, "huge", ai, `{"max_concurrency": 4}`)
	s.rule(t, "caption", "huge", "public.captions", "caption")
	const budget = 32 << 20
	p := s.runProcess(t, fmt.Sprintf("PGIMAGEAI_BYTE_BUDGET=%d", budget))
	want := map[int]string{}
	insertRows(t, s, 1, 5, 4, want)
	s.sync(t, 120*time.Second)
	rss := vmHWM(t, p.cmd.Process.Pid)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("stop: %v", err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'bad_response' AND resolved_at IS NULL"); n != 4 {
		t.Errorf("%d bad_response rows, want 4", n)
	}
	t.Logf("peak RSS %.1f MiB with 4 answers of 600 MB at once (budget 32 MiB)", float64(rss)/(1<<20))
	if rss > budget+64<<20 {
		t.Errorf("peak RSS %d MiB > budget + 64 MiB", rss>>20)
	}
}

// TestHostileAnswerNUL: a provider whose answer holds a NUL character (which
// a text column cannot store) gets a bad_response row for that row, and the
// lane goes on with the others instead of retrying the write forever.
func TestHostileAnswerNUL(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	nul := magic.DataURL(magic.PNG, pngImage(t, 1))
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.DataURL == nul {
			return 200, "a\x00b"
		}
		return 200, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	want := map[int]string{}
	insertRows(t, s, 1, 4, 1, want)
	s.sync(t, 30*time.Second)
	want[1] = "<NULL>"
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'bad_response' AND detail LIKE '%NUL%' AND resolved_at IS NULL"); n != 1 {
		t.Errorf("%d bad_response rows about the NUL, want 1", n)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}

// TestTargetRefusesOneResult: a target column that refuses some answers (a
// user's CHECK constraint) costs only those rows — a NULL and a bad_response
// row saying why — while the lane writes the others.
func TestTargetRefusesOneResult(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	refusedURL := magic.DataURL(magic.PNG, pngImage(t, 2))
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.DataURL == refusedURL {
			return 200, "forbidden words"
		}
		return 200, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `CREATE TABLE public.captions (id int PRIMARY KEY, caption text CHECK (caption NOT LIKE 'forbidden%'))`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	want := map[int]string{}
	insertRows(t, s, 1, 5, 4, want) // one transaction: one batch to split
	s.sync(t, 60*time.Second)
	want[2] = "<NULL>"
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'bad_response' AND detail LIKE '%refused the answer%23514%' AND resolved_at IS NULL"); n != 1 {
		t.Errorf("%d bad_response rows for the refused answer, want 1", n)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
