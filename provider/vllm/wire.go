package vllm

import "github.com/pgimageai/pgimageai/provider/httpjson"

// request is the body of POST {base_url}/embeddings: vLLM's chat-style
// embedding request (EmbeddingChatRequest in
// vllm/entrypoints/openai/protocol.py: model, messages, encoding_format,
// dimensions), as vLLM's example sends it for VLM2Vec
// (examples/online_serving/openai_chat_embedding_client_for_multimodal.py:
// an image_url part, then a text part "Represent the given image.").
type request struct {
	Model          string    `json:"model"`
	Messages       []message `json:"messages"`
	EncodingFormat string    `json:"encoding_format"`
	Dimensions     int       `json:"dimensions,omitempty"`
}

type message struct {
	Role    string          `json:"role"`
	Content []httpjson.Part `json:"content"`
}

func newRequest(model string, cfg Config, dataURL string) request {
	content := []httpjson.Part{httpjson.ImagePart(dataURL)}
	if cfg.Text != "" {
		content = append(content, httpjson.TextPart(cfg.Text))
	}
	return request{
		Model:          model,
		Messages:       []message{{Role: "user", Content: content}},
		EncodingFormat: "float",
		Dimensions:     cfg.Dimensions,
	}
}

// answer is vLLM's OpenAI-style embeddings answer.
type answer struct {
	Data  []httpjson.Item `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}
