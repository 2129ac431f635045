package jina

import "github.com/pgimageai/pgimageai/provider/httpjson"

// request is the body of POST {base_url}/embeddings.
type request struct {
	Model string  `json:"model"`
	Input []input `json:"input"`
}

type input struct {
	Image string `json:"image"` // standard base64 of the image bytes
}

func newRequest(model string, images []string) request {
	r := request{Model: model, Input: make([]input, len(images))}
	for i, b := range images {
		r.Input[i] = input{Image: b}
	}
	return r
}

// answer is Jina's OpenAI-style embeddings answer.
type answer struct {
	Data  []httpjson.Item `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}
