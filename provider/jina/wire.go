package jina

import "github.com/pgimageai/pgimageai/provider/httpjson"

// request is the body of POST {base_url}/embeddings, per Jina's embeddings
// API (https://jina.ai/embeddings, "API" tab; https://api.jina.ai/redoc):
// model, input as [{"image": BASE64}], and the optional task, dimensions
// and normalized.
type request struct {
	Model      string  `json:"model"`
	Input      []input `json:"input"`
	Task       string  `json:"task,omitempty"`
	Dimensions int     `json:"dimensions,omitempty"`
	Normalized *bool   `json:"normalized,omitempty"`
}

type input struct {
	Image string `json:"image"` // standard base64 of the image bytes
}

func newRequest(model string, cfg Config, images []string) request {
	r := request{Model: model, Input: make([]input, len(images)), Task: cfg.Task, Dimensions: cfg.Dimensions, Normalized: cfg.Normalized}
	for i, b := range images {
		r.Input[i] = input{Image: b}
	}
	return r
}

// answer is Jina's OpenAI-style embeddings answer. Jina's examples report
// usage as {"total_tokens": N} only; prompt_tokens is read when
// total_tokens is absent.
type answer struct {
	Data  []httpjson.Item `json:"data"`
	Usage struct {
		TotalTokens  int `json:"total_tokens"`
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// tokens returns the tokens the answer reports for the request.
func (a answer) tokens() int {
	if a.Usage.TotalTokens > 0 {
		return a.Usage.TotalTokens
	}
	return a.Usage.PromptTokens
}
