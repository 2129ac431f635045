// Package openai is the provider for any OpenAI-compatible
// /v1/chat/completions endpoint: OpenAI, Azure-style gateways, Ollama, vLLM,
// llama.cpp, LM Studio. It implements provider.TextGenerator — one
// user message holding a text part and an image_url part with the image as a
// data URL — and deliberately not provider.Embedder.
//
// It talks through github.com/sashabaranov/go-openai, with our own HTTPDoer
// underneath (wire.go) that repairs two fields go-openai's omitempty tags drop
// and captures each response's status and Retry-After for the retry loop.
// Every failure is a *provider.Error; none ever contains the API key.
//
// In the flow, main registers Factory under "openai"; functions calls
// GenerateText for AI_IMAGE_COMPLETE rules whose model uses this provider.
//
// Layer: provider.
package openai
