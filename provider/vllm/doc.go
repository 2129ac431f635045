// Package vllm is the image-embedding provider for vLLM's pooling models
// served with an OpenAI-compatible API (VLM2Vec, DSE-Qwen2, …): one
// POST {base_url}/embeddings per image, the image sent as a chat message with
// an image_url part holding its data URL (and a text part when the text
// option is set), "encoding_format":"float", and dimensions when set.
//
// vLLM embeds one conversation per request, so there is no batching; its own
// scheduler batches concurrent requests on the GPU. Provider implements
// provider.Embedder only.
//
// In the flow, main registers Factory under "vllm"; functions calls EmbedImage
// for AI_IMAGE_EMBED rules whose model uses this provider.
//
// Layer: provider.
package vllm
