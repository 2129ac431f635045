package httpjson

import (
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/batch"
)

// Item is one vector of an OpenAI-style embeddings answer,
// {"data":[{"index":i,"embedding":[…]}]}; Index nil means "by position".
type Item struct {
	Index     *int      `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// ByIndex orders the vectors of an answer to n inputs by their index. Every
// input must have exactly one non-empty vector, else BadResponse.
func ByIndex(items []Item, n int) ([][]float32, error) {
	if len(items) == 0 {
		return nil, provider.Errorf(provider.BadResponse, "answer has no embeddings for %d inputs", n)
	}
	out := make([][]float32, n)
	for pos, it := range items {
		i := pos
		if it.Index != nil {
			i = *it.Index
		}
		switch {
		case i < 0 || i >= n:
			return nil, provider.Errorf(provider.BadResponse, "answer has an embedding for input %d of %d", i, n)
		case out[i] != nil:
			return nil, provider.Errorf(provider.BadResponse, "answer has two embeddings for input %d", i)
		case len(it.Embedding) == 0:
			return nil, provider.Errorf(provider.BadResponse, "answer has an empty embedding for input %d", i)
		}
		out[i] = it.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, provider.Errorf(provider.BadResponse, "answer has %d embeddings for %d inputs (none for input %d)", len(items), n, i)
		}
	}
	return out, nil
}

// CheckDimensions returns BadResponse unless every vector has want values,
// or, when want is 0 (not configured), at most provider.MaxDimensions.
func CheckDimensions(vecs [][]float32, want int) error {
	if want == 0 {
		for _, v := range vecs {
			if err := provider.CheckVectorLength(v); err != nil {
				return err
			}
		}
		return nil
	}
	for _, v := range vecs {
		if len(v) != want {
			return provider.Errorf(provider.BadResponse, "returned %d dimensions, want %d", len(v), want)
		}
	}
	return nil
}

// Embeddings turns the vectors of one batch answer, one per input in input
// order, into Embeddings: it checks their dimensions (want 0 = not checked)
// and shares the tokens the answer reports for the batch among them.
func Embeddings(vecs [][]float32, want, tokens int) ([]provider.Embedding, error) {
	if err := CheckDimensions(vecs, want); err != nil {
		return nil, err
	}
	out := make([]provider.Embedding, len(vecs))
	for i, v := range vecs {
		out[i] = provider.Embedding{Vector: v, Usage: provider.Usage{PromptTokens: batch.Share(tokens, len(vecs), i)}}
	}
	return out, nil
}
