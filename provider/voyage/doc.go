// Package voyage is the image-embedding provider for Voyage AI's multimodal
// embeddings (voyage-multimodal-3 and later): POST
// {base_url}/multimodalembeddings with "inputs":[{"content":[{"type":
// "image_base64","image_base64":DATA_URL}]}, …] and "input_type":"document"
// (the images are what is searched; a query embeds with "query").
//
// Rows ready within batch_wait (default 20ms) are sent together, up to
// batch_size (default 32, at most 1000) per request and at most 320,000
// estimated tokens (a token per 560 pixels, from the image header); each row is charged its
// share of the request's total_tokens. Provider implements provider.Embedder
// only.
//
// In the flow, main registers Factory under "voyage"; functions calls
// EmbedImage for AI_IMAGE_EMBED rules whose model uses this provider.
//
// Layer: provider.
package voyage
