// Package local is the built-in provider: offline, deterministic and without
// a neural network. It needs no base URL, no API key and no network,
// which makes it the default of the demo and of tests that need a real
// provider.
//
// It implements both capabilities:
//
//   - provider.TextGenerator: GenerateText answers with a short factual
//     English description computed from the decoded pixels, e.g. "PNG image,
//     640x480 pixels, mostly blue (62%) and white (30%), medium brightness."
//     The prompt is accepted and ignored; Usage is always zero.
//   - provider.Embedder: EmbedImage returns a unit-length perceptual vector of
//     Dimensions (128) values whose cosine similarity ranks resized and
//     re-encoded copies of an image first. Its layout is described at
//     Dimensions.
//
// Images are decoded with the standard library (PNG, JPEG, GIF — the first
// frame) and golang.org/x/image/webp, chosen by the MIME type the caller
// detected from the magic bytes; the global image.Decode registry is not used.
// The header is checked before any pixel is decoded against Limits (options
// max_side, max_aspect, max_pixels and max_decoded_bytes, an estimate of
// what the decoder would allocate for the format and colour model, and
// max_jpeg_scans), so a decompression bomb is refused cheaply, as a provider.TooLarge error that
// functions records as too_large. Every feature is computed from one copy
// downscaled to at most 256 pixels on the long side by a resampler whose
// memory is proportional to that copy.
// An image that cannot be decoded is a permanent *provider.Error carrying the
// decoder's message, which functions records as provider_error.
//
// The same bytes give the same text and bit-identical vectors on a given
// architecture (the float arithmetic may differ in the last bits between
// architectures whose compilers fuse multiply-adds).
//
// In the flow, main registers Factory under "local"; functions calls
// GenerateText for AI_IMAGE_COMPLETE rules and EmbedImage for AI_IMAGE_EMBED
// rules whose model uses this provider. models.model is free text and
// models.base_url and models.api_key_env are ignored.
//
// Layer: provider.
package local
