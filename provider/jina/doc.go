// Package jina is the image-embedding provider for Jina AI's embeddings API
// (jina-clip-v2, jina-embeddings-v4, …): POST {base_url}/embeddings with
// "input":[{"image":BASE64}, …], the image as plain standard base64 (no data
// URL prefix), and task, dimensions and normalized when set.
//
// Rows ready within batch_wait (default 20ms) are sent together, up to
// batch_size (default 32, at most 512) per request; each row is charged its
// share of the request's total_tokens. Provider implements provider.Embedder
// only.
//
// In the flow, main registers Factory under "jina"; functions calls
// EmbedImage for AI_IMAGE_EMBED rules whose model uses this provider.
//
// Layer: provider.
package jina
