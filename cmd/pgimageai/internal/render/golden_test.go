package render

import (
	"bytes"
	"flag"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// fullStatus is sampleStatus with every other section filled in too.
func fullStatus() Status {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	r := sampleStatus()
	r.Groups = []GroupStatus{
		{Group: "default", Rules: 3, Enabled: 2, Slot: "pgimageai", Found: true, Active: true, Lag: 2048},
		{Group: "thumbs", Rules: 1, Enabled: 1, Slot: "pgimageai_thumbs"},
	}
	r.Models = []modelPace{
		{Model: "gpt", InFlight: 5, Limit: 6, Ceil: 64, LimitBy: "429 backoff", Pace: "19.4 of 20 req/s, by x-ratelimit", Limited1m: 3, Answered1m: 1160,
			Waited: 95 * time.Second, RateLimited: true, UpdatedAt: at, Age: 2 * time.Second},
	}
	r.Batches = []batchRow{
		{Rule: "caption", Seq: 1, BatchID: "batch_1", Status: "completed", Requests: 1000, Completed: 997, Failed: 3,
			Downloaded: true, Applied: true, Created: at, Age: 2*time.Hour + 5*time.Minute},
		{Rule: "caption", Seq: 4, Status: "refused", Requests: 20, Created: at, Age: time.Second},
	}
	r.ErrorCaps = []errorCap{{Rule: "caption", Open: 5, MaxOpen: pointerTo[int64](5), Dropped: 15, LastDroppedAt: &at}}
	r.Budgets = []BudgetStatus{{Model: "gpt", Day: at, Calls: 10, Tokens: 2000, MaxCalls: 100}}
	r.Outages = OutageStatus{Models: []ModelHealth{{ModelHealth: state.ModelHealth{Model: "vision", Down: true, Since: at, Cause: "dial tcp: connection refused"},
		Parked: 42, OldestParked: at.Add(time.Second)}}}
	r.Gaps = []slotGap{{DetectedAt: at, Cause: "slot_missing", Checkpoint: 0x30D7600, SlotLSN: 0x30FE768, Rules: []string{"a", "b"}}}
	r.Versions = []resultVersion{
		{Rule: "caption", Version: "1a2b3c4d5e6f7a8b", ModelID: "gpt-4o-mini", Results: 118, Live: true},
		{Rule: "caption", Results: 40},
	}
	r.Switches, r.History = sampleSwitches(), sampleHistory()
	return r
}

// fullEstimate is an estimate of a sampled table through a batch API, with
// a switch to cost and normalisation on.
func fullEstimate() estimate.Report {
	sizes := make([]image.Point, 8)
	for i := range sizes {
		sizes[i] = image.Pt(4032, 3024)
	}
	norm := estimate.Norm{Enabled: true, Sizes: sizes, StoredBytes: 3e6, SentBytes: 5e5, StoredTokens: 21773}
	return estimate.Report{
		Rule:      state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE", Model: "vision", SourceTable: "public.photos", ImageColumn: "Img"},
		Model:     provider.Model{Name: "vision", Provider: "openai", Model: "gpt-4o-mini"},
		Scan:      estimate.Scan{Rows: 1000, Sampled: true, Read: 10, WithImage: 9, Sizes: sizes, Unknown: 1},
		TokenRule: "OpenAI's rule", InputPerImage: 100, OutputPerCall: 40, OutputFrom: "max_tokens, an upper bound",
		PriceIn: 2, PriceOut: 8, BatchBackfill: true, Norm: &norm,
		Change: &estimate.VersionChange{Kind: estimate.ChangeSwitch, From: "aaaaaaaa00000001", FromModelID: "gpt-4o", To: "bbbbbbbb00000002", ToModelID: "gpt-4o-mini", SwitchState: "held"},
	}
}

// TestGolden: the documents of status, errors and switch, byte for byte as
// scripts and the docs know them (go test -update rewrites testdata/).
func TestGolden(t *testing.T) {
	tests := []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"status.json", func(b *bytes.Buffer) error { return WriteStatus(b, fullStatus(), FormatJSON) }},
		{"status.txt", func(b *bytes.Buffer) error { return WriteStatus(b, fullStatus(), FormatTable) }},
		{"errors.json", func(b *bytes.Buffer) error { return WriteErrors(b, sampleErrors(), FormatJSON) }},
		{"estimate.json", func(b *bytes.Buffer) error { return JSON(b, estimateDocument(fullEstimate())) }},
		{"estimate.txt", func(b *bytes.Buffer) error { _, err := b.WriteString(estimateText(fullEstimate())); return err }},
		{"estimate-unknown.json", func(b *bytes.Buffer) error {
			e := fullEstimate()
			e.InputPerImage, e.OutputPerCall, e.PriceIn, e.Change = math.NaN(), math.NaN(), 0, nil
			return JSON(b, estimateDocument(e))
		}},
		{"switches.json", func(b *bytes.Buffer) error {
			return WriteSwitchList(b, SwitchList{Switches: sampleSwitches(), History: sampleHistory()}, FormatJSON)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs:\ngot\n%s\nwant\n%s", tc.file, b.Bytes(), want)
			}
		})
	}
}
