// Package httpjson is the JSON-over-HTTP client shared by the embedding
// providers (vllm, llamacpp, voyage, cohere, jina): one POST per attempt with
// the model's timeout, a limiter slot (max_concurrency, requests_per_minute),
// the Authorization header when a key is configured, and retries per
// provider.Retrier honouring Retry-After.
//
// Every failure is a *provider.Error: an HTTP error answer carries its status,
// provider.StatusKind(status) and the server's own message; an I/O error or a
// timeout is Transient; a 2xx answer that does not decode is BadResponse. No
// message, and no error in an unwrapped chain, ever contains the API key.
//
// In the flow it sits below the provider subpackages and above net/http; it
// imports of pgimageai provider, provider/pace, provider/batch and magic
// only.
//
// Layer: provider.
package httpjson
