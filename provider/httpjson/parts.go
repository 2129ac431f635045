package httpjson

// Part is one part of an OpenAI-style chat message's content: an image_url
// part holding a data URL, or a text part. vLLM's chat-style embedding
// request (EmbeddingChatRequest in vllm/entrypoints/openai/protocol.py) and
// llama.cpp's /v1/embeddings content inputs ("using the same parts as
// /v1/chat/completions", tools/server/README.md) both take it.
type Part struct {
	Type     string    `json:"type"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
	Text     string    `json:"text,omitempty"`
}

// ImageURL is the image of an image_url Part.
type ImageURL struct {
	URL string `json:"url"`
}

// ImagePart returns the image_url part of a data URL.
func ImagePart(dataURL string) Part {
	return Part{Type: "image_url", ImageURL: &ImageURL{URL: dataURL}}
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Type: "text", Text: text} }
