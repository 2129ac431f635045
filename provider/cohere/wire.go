package cohere

import (
	"math"

	"github.com/pgimageai/pgimageai/provider"
)

// request is the body of POST {base_url}/v2/embed, as cohere-python's
// v2 client sends it (src/cohere/v2/client.py embed: model, input_type,
// embedding_types, output_dimension, inputs) with each input's content a
// list of src/cohere/types/embed_content.py ImageUrlEmbedContent parts:
// {"type":"image_url","image_url":{"url":DATA_URL}} (EmbedImageUrl).
type request struct {
	Model           string   `json:"model"`
	Inputs          []input  `json:"inputs"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"` // 0 = the model's default
}

type input struct {
	Content []part `json:"content"`
}

type part struct {
	Type     string   `json:"type"`
	ImageURL imageURL `json:"image_url"`
}

type imageURL struct {
	URL string `json:"url"`
}

func newRequest(model string, cfg Config, dataURLs []string) request {
	r := request{
		Model:           model,
		Inputs:          make([]input, len(dataURLs)),
		InputType:       cfg.InputType,
		EmbeddingTypes:  []string{"float"},
		OutputDimension: cfg.Dimensions,
	}
	for i, u := range dataURLs {
		r.Inputs[i] = input{Content: []part{{Type: "image_url", ImageURL: imageURL{URL: u}}}}
	}
	return r
}

// answer is Cohere's v2 embed answer: vectors by position. The billed
// units are floats (src/cohere/types/api_meta_billed_units.py:
// input_tokens, image_tokens, images are Optional[float]).
type answer struct {
	Embeddings struct {
		Float [][]float32 `json:"float"`
	} `json:"embeddings"`
	Meta struct {
		BilledUnits struct {
			InputTokens float64 `json:"input_tokens"`
			ImageTokens float64 `json:"image_tokens"`
			Images      float64 `json:"images"`
		} `json:"billed_units"`
	} `json:"meta"`
}

// tokens returns the request's billed input and image tokens, rounded.
func (a answer) tokens() int {
	t := a.Meta.BilledUnits.InputTokens + a.Meta.BilledUnits.ImageTokens
	if t <= 0 || math.IsNaN(t) || t > math.MaxInt32 {
		return 0
	}
	return int(math.Round(t))
}

// vectors returns the answer's n float vectors, in input order.
func (a answer) vectors(n int) ([][]float32, error) {
	vs := a.Embeddings.Float
	if len(vs) != n {
		return nil, provider.Errorf(provider.BadResponse, "answer has %d float embeddings for %d inputs", len(vs), n)
	}
	for i, v := range vs {
		if len(v) == 0 {
			return nil, provider.Errorf(provider.BadResponse, "answer has an empty embedding for input %d", i)
		}
	}
	return vs, nil
}
