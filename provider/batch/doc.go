// Package batch groups the single-image calls that many goroutines make to an
// embedding provider into multi-input requests: calls arriving within a short
// window (batch_wait) or until batch_size inputs are pending are sent
// together, and each caller receives its own result by index.
//
// In the flow, functions calls a provider's EmbedImage once per row, from as
// many goroutines as the bridge runs; the providers whose APIs take many
// inputs per request (voyage, cohere, jina, llamacpp) put a Batcher between
// EmbedImage and their HTTP client, which cuts the number of requests — and
// so the requests_per_minute spent — by up to batch_size.
//
// Layer: provider.
package batch
