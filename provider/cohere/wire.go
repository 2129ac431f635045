package cohere

import "github.com/pgimageai/pgimageai/provider"

// request is the body of POST {base_url}/v2/embed.
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
	Type     string `json:"type"`
	ImageURL string `json:"image_url"`
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
		r.Inputs[i] = input{Content: []part{{Type: "image_url", ImageURL: u}}}
	}
	return r
}

// answer is Cohere's v2 embed answer: vectors by position.
type answer struct {
	Embeddings struct {
		Float [][]float32 `json:"float"`
	} `json:"embeddings"`
	Meta struct {
		BilledUnits struct {
			InputTokens int `json:"input_tokens"`
			Images      int `json:"images"`
		} `json:"billed_units"`
	} `json:"meta"`
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
