// Package llamacpp is the image-embedding provider for llama.cpp's
// llama-server started with --embeddings, a pooling type and a multimodal
// projector: POST {base_url}/embeddings with one input per image, in one of
// the two shapes of llama.cpp's tools/server/README.md (see request):
// {"content":[image_url part, text part]} or {"prompt_string":MARKER+TEXT,
// "multimodal_data":[BASE64]}, chosen by the request_shape option or, unset,
// by GET /props (multimodal_data with its media_marker; content when the
// server has no /props; asked again when a restarted server, which draws a
// new marker, answers "Failed to tokenize prompt"). A text (default "\n")
// always follows the image: a prompt that ends with the image aborts the
// server.
//
// Formats default to PNG, JPEG and GIF, which llama.cpp's decoder reads; a
// WebP is an unsupported_format row, never sent. Rows ready within
// batch_wait (default 20ms) are sent together, up to batch_size (default
// 16) per request; a batch that the server fails because of one image
// (HTTP 500 "Failed to load image or audio file", permanent) is split until
// that image fails alone. Answers may be OpenAI-style
// ({"data":[{"index":i,"embedding":[…]}]}, from {base_url} = …/v1) or
// llama.cpp's own array ([{"index":i,"embedding":[[…]]}]). An embedding given
// as an array of arrays is accepted when it holds one vector (a pooled
// embedding); several vectors mean per-token embeddings (--pooling none),
// which cannot fill one column, and are a bad_response asking for a pooling
// type. Provider implements provider.Embedder only.
//
// In the flow, main registers Factory under "llamacpp"; functions calls
// EmbedImage for AI_IMAGE_EMBED rules whose model uses this provider.
//
// Layer: provider.
package llamacpp
