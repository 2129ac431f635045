package provider

import (
	"encoding/json"
	"math"
	"testing"
)

func TestPrices(t *testing.T) {
	tests := []struct {
		name    string
		options string
		in, out float64
		want    float64
		wantOK  bool
		batch   bool
	}{
		{"input and output", `{"price_per_1m_input_tokens": 2.5, "price_per_1m_output_tokens": 10}`, 1e6, 2e5, 2.5 + 2, true, false},
		{"no output price adds nothing", `{"price_per_1m_input_tokens": 2.5}`, 4e5, 1e6, 1, true, false},
		{"unknown output tokens add nothing", `{"price_per_1m_input_tokens": 2.5, "price_per_1m_output_tokens": 10}`, 4e5, math.NaN(), 1, true, false},
		{"no input price: unknown", `{"price_per_1m_output_tokens": 10}`, 1e6, 1e6, 0, false, false},
		{"unknown input tokens: unknown", `{"price_per_1m_input_tokens": 2.5}`, math.NaN(), 0, 0, false, false},
		{"batch_api", `{"price_per_1m_input_tokens": 1, "batch_api": true}`, 1e6, 0, 1, true, true},
		{"options that do not parse: no prices", `{"price_per_1m_input_tokens": "x"}`, 1e6, 0, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PricesOf(Model{Options: json.RawMessage(tt.options)})
			if p.BatchAPI != tt.batch {
				t.Errorf("BatchAPI %v, want %v", p.BatchAPI, tt.batch)
			}
			got, ok := p.Cost(tt.in, tt.out)
			if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Cost = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
