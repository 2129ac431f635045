package console

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// TestBudgets: a model's spend against its caps, priced by the model's
// price_per_1m_* options (provider.Prices), summed over its rules.
func TestBudgets(t *testing.T) {
	models := []provider.Model{
		{Name: "gpt", Options: json.RawMessage(`{"price_per_1m_input_tokens": 2, "price_per_1m_output_tokens": 8, "max_calls_per_day": 100}`)},
		{Name: "free", Options: json.RawMessage(`{}`)},
		{Name: "broken", Options: json.RawMessage(`{"price_per_1m_input_tokens": "x"}`)},
	}
	spent := map[string]state.Spent{"gpt": {Calls: 3, Tokens: 3000}}
	usage := []state.UsageRow{
		{Rule: "caption", Model: "gpt", PromptTokens: 1_000_000, CompletionTokens: 100_000},
		{Rule: "tags", Model: "gpt", PromptTokens: 500_000},
		{Rule: "embed", Model: "free", PromptTokens: 1_000_000},
	}
	got := budgets(models, spent, usage)
	if len(got) != 2 || got[0].Model != "free" || got[1].Model != "gpt" {
		t.Fatalf("budgets %+v, want free and gpt (broken left out), by name", got)
	}
	if free := got[0]; free.Priced || free.Cost != 0 {
		t.Errorf("free: %+v, want no price and no cost", free)
	}
	gpt := got[1]
	if !gpt.Priced || math.Abs(gpt.Cost-(2+0.8+1)) > 1e-9 || gpt.Calls != 3 || gpt.Tokens != 3000 || gpt.MaxCalls != 100 {
		t.Errorf("gpt: %+v, want priced, cost 3.8, 3 calls, 3000 tokens, cap 100 calls", gpt)
	}
}
