package render

import (
	"image"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/estimate"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

func TestEstimateReportSampled(t *testing.T) {
	sizes := make([]image.Point, 800)
	for i := range sizes {
		sizes[i] = image.Pt(1024, 1024)
	}
	e := estimate.Report{
		Rule:      state.RuleListing{Name: "caption", Function: "AI_IMAGE_EMBED", Model: "emb", SourceTable: "public.photos", ImageColumn: "img"},
		Model:     provider.Model{Name: "emb", Provider: "voyage", Model: "voyage-multimodal-3"},
		Scan:      estimate.Scan{Rows: 100000, Sampled: true, Read: 1000, WithImage: 900, Sizes: sizes, Unknown: 100},
		TokenRule: "Voyage's rule", InputPerImage: 1873, PriceIn: 0.12,
	}
	got := estimateText(e)
	for _, want := range []string{
		"Source: about 100000 rows (pg_class estimate); a sample of 1000 rows was read, 900 with an image",
		"100 images have no known format",
		"Backfill: 80000 calls, 149840000 input tokens, cost 17.98080",
		"Per 1,000 new rows like these: 800 calls, 1498400 input tokens, cost 0.17981",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("estimate lacks %q:\n%s", want, got)
		}
	}
}

// TestEstimateReportBatchAPI: a batch_api model's backfill costs half (the
// Batch API's price); new rows, called synchronously, cost the full price.
func TestEstimateReportBatchAPI(t *testing.T) {
	e := estimate.Report{
		Rule:      state.RuleListing{Name: "caption", Function: "AI_IMAGE_COMPLETE", Model: "gpt", SourceTable: "public.photos", ImageColumn: "img"},
		Model:     provider.Model{Name: "gpt", Provider: "openai", Model: "gpt-4o"},
		Scan:      estimate.Scan{Rows: 10, Read: 10, WithImage: 10, Sizes: make([]image.Point, 10)},
		TokenRule: "OpenAI's rule", InputPerImage: 85, OutputPerCall: 100, OutputFrom: "max_tokens", PriceIn: 2.5, PriceOut: 10,
	}
	full := estimateText(e)
	e.BatchBackfill = true
	half := estimateText(e)
	for _, c := range []struct{ got, want string }{
		{full, "Backfill: 10 calls, 850 input tokens, 1000 output tokens (max_tokens), cost 0.01213 (at the model's"},
		{half, "Backfill: 10 calls, 850 input tokens, 1000 output tokens (max_tokens), cost 0.00606 (half the model's price_per_1m_* options: the Batch API)"},
		{half, "Per 1,000 new rows like these: 1000 calls, 85000 input tokens, 100000 output tokens (max_tokens), cost 1.21250 (at the model's"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("estimate lacks %q:\n%s", c.want, c.got)
		}
	}
}
