// Package cohere is the image-embedding provider for Cohere's Embed v2 API
// (embed-v4.0; the v3.0 models take no images in inputs and are refused):
// POST {base_url}/v2/embed with "inputs":[{"content":[{"type":"image_url",
// "image_url":{"url":DATA_URL}}]}, …], "embedding_types":["float"],
// input_type (default search_document) and output_dimension when
// dimensions is set.
//
// Rows ready within batch_wait (default 20ms) are sent together, up to
// batch_size (default 32, at most 96) per request; each row is charged its
// share of the request's billed input_tokens and image_tokens (floats). Provider implements
// provider.Embedder only.
//
// In the flow, main registers Factory under "cohere"; functions calls
// EmbedImage for AI_IMAGE_EMBED rules whose model uses this provider.
//
// Layer: provider.
package cohere
