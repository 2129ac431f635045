package render

import (
	"encoding/json"
	"image"
	"math"
	"testing"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// TestEstimateJSON: --format json gives the figures the text gives, with
// unknown tokens as null (never NaN, which JSON cannot hold), and the Batch
// API's half price.
func TestEstimateJSON(t *testing.T) {
	sizes := make([]image.Point, 8)
	e := estimate.Report{
		Rule:          state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE"},
		Model:         provider.Model{Name: "vision", Provider: "openai", Model: "gpt-4o-mini"},
		Scan:          estimate.Scan{Rows: 1000, Sampled: true, Read: 10, WithImage: 9, Sizes: sizes, Unknown: 1},
		InputPerImage: 100, OutputPerCall: math.NaN(), PriceIn: 2, BatchBackfill: true,
	}
	b, err := json.Marshal(estimateDocument(e))
	if err != nil {
		t.Fatal(err)
	}
	var got estimateJSON
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	bf := got.Backfill
	if bf.Calls != 800 || bf.InputTokens == nil || *bf.InputTokens != 80000 || bf.OutputTokens != nil || !bf.BatchAPI {
		t.Fatalf("backfill %+v (%s); want 800 calls, 80000 input tokens, output unknown, batch", bf, b)
	}
	if bf.Cost == nil || math.Abs(*bf.Cost-0.08) > 1e-9 {
		t.Errorf("backfill cost %v, want 0.08 (80,000 tokens at 2 per million, halved)", bf.Cost)
	}
	if p := got.Per1000Rows; p.Calls != 800 || p.BatchAPI || p.Cost == nil || math.Abs(*p.Cost-0.16) > 1e-9 {
		t.Errorf("per 1,000 rows %+v; want 800 calls at the full price 0.16", p)
	}
	if got.SourceRows != 1000 || !got.Sampled || got.UnknownFormat != 1 || got.Provider != "openai" {
		t.Errorf("header %+v", got)
	}
}
