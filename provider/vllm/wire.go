package vllm

import "github.com/pgimageai/pgimageai/provider/httpjson"

// request is the body of POST {base_url}/embeddings: vLLM's chat-style
// embedding request.
type request struct {
	Model          string    `json:"model"`
	Messages       []message `json:"messages"`
	EncodingFormat string    `json:"encoding_format"`
}

type message struct {
	Role    string `json:"role"`
	Content []part `json:"content"`
}

type part struct {
	Type     string   `json:"type"`
	ImageURL imageURL `json:"image_url"`
}

type imageURL struct {
	URL string `json:"url"`
}

func newRequest(model, dataURL string) request {
	return request{
		Model: model,
		Messages: []message{{Role: "user", Content: []part{
			{Type: "image_url", ImageURL: imageURL{URL: dataURL}},
		}}},
		EncodingFormat: "float",
	}
}

// answer is vLLM's OpenAI-style embeddings answer.
type answer struct {
	Data  []httpjson.Item `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}
