package httpjson

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider/batch"
)

func TestParseEmbedConfig(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		wantErr   string
		wantBatch int
		wantDims  int
	}{
		{name: "defaults", raw: `{}`, wantBatch: 16},
		{name: "null options", raw: ``, wantBatch: 16},
		{name: "all set", raw: `{"batch_size": 64, "batch_wait": "20ms", "dimensions": 512, "max_retries": 1}`, wantBatch: 64, wantDims: 512},
		{name: "batch at the maximum", raw: `{"batch_size": 100}`, wantBatch: 100},
		{name: "batch over the maximum", raw: `{"batch_size": 101}`, wantErr: "batch_size"},
		{name: "negative dimensions", raw: `{"dimensions": -1}`, wantErr: "dimensions"},
		{name: "shared option checked", raw: `{"max_retries": -1}`, wantErr: "max_retries"},
		{name: "unknown key named", raw: `{"dimension": 3}`, wantErr: `"dimension"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseEmbedConfig(json.RawMessage(tt.raw), 16, 100)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.BatchSize != tt.wantBatch || c.Dimensions != tt.wantDims {
				t.Errorf("batch_size %d dimensions %d, want %d and %d", c.BatchSize, c.Dimensions, tt.wantBatch, tt.wantDims)
			}
			if c.MaxConcurrency < 1 || time.Duration(c.BatchWait) <= 0 {
				t.Errorf("defaults not applied: %+v", c)
			}
			if tt.name == "defaults" && time.Duration(c.BatchWait) != batch.DefaultWait {
				t.Errorf("batch_wait %s, want %s", time.Duration(c.BatchWait), batch.DefaultWait)
			}
		})
	}
}

func TestEmbeddings(t *testing.T) {
	vecs := [][]float32{{1, 0}, {0, 1}, {1, 1}}
	out, err := Embeddings(vecs, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, e := range out {
		if len(e.Vector) != 2 || e.Vector[0] != vecs[i][0] || e.Vector[1] != vecs[i][1] {
			t.Errorf("embedding %d = %v, want %v", i, e.Vector, vecs[i])
		}
		total += e.Usage.PromptTokens
	}
	if total != 10 {
		t.Errorf("tokens shared to %d in all, want the batch's 10", total)
	}
	if _, err := Embeddings(vecs, 3, 10); err == nil || !strings.Contains(err.Error(), "returned 2 dimensions, want 3") {
		t.Errorf("wrong dimensions: err = %v", err)
	}
	if out, err := Embeddings(vecs, 0, 0); err != nil || len(out) != 3 {
		t.Errorf("dimensions unchecked: %d, %v", len(out), err)
	}
}
