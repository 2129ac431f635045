// Package provider defines what an AI provider can do — the capability
// interfaces TextGenerator (image + prompt → text) and Embedder (image →
// vector) — the Registry that builds providers by name from pgimageai.models
// rows, the options every provider shares, and the retry and rate
// limiting that every HTTP provider uses.
//
// In the flow, functions validates an image (magic) and then calls one of the
// capability interfaces; the provider subpackages (openai, local, ...) implement
// them. Errors returned by providers are *Error values that say whether they
// are transient and which HTTP status, if any, caused them.
//
// Layer: provider.
package provider
