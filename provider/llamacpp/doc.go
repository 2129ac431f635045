// Package llamacpp is the image-embedding provider for llama.cpp's
// llama-server started with --embeddings and a multimodal projector:
// POST {base_url}/embeddings with "input":[{"content":[{"type":"image_url",
// "image_url":{"url":DATA_URL}}]}, …], one element per image.
//
// Rows ready within batch_wait (default 20ms) are sent together, up to
// batch_size (default 16) per request. Answers may be OpenAI-style
// ({"data":[{"index":i,"embedding":[…]}]}, from {base_url} = …/v1) or
// llama.cpp's own array ([{"index":i,"embedding":[[…]]}]). An embedding given
// as an array of arrays is accepted when it holds one vector (a pooled
// embedding); several vectors mean per-token embeddings (--pooling none),
// which cannot fill one column, and are a bad_response asking for a pooling
// type. Provider implements provider.Embedder only.
//
// In the flow, main registers Factory under "llamacpp"; functions calls
// EmbedImage for AI_IMAGE_EMBED rules whose model uses this provider.
package llamacpp
