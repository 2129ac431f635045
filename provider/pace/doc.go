// Package pace governs the requests of one model: how many may be in flight
// (an adaptive limit under the max_concurrency ceiling) and how fast they
// may start (a pace taken from the provider's own rate-limit state, under
// the requests_per_minute and tokens_per_minute ceilings).
//
// A provider builds one Governor per model and wraps every HTTP attempt in
// Acquire and Ticket.Done. What the provider answers feeds back:
//
//   - rate-limit headers (OpenAI's x-ratelimit-* six, the IETF draft's
//     RateLimit-*) set the pace so that the remaining budget is not overrun;
//   - a 429, or a 503 with Retry-After, pauses the whole model (for the
//     server's Retry-After, else until the bucket the headers describe
//     refills, else a growing backoff), cuts the pace and the concurrency;
//   - the concurrency limit follows what the server says, never the length
//     of its answers (Mode): a hosted API runs at the ceiling, cut by its
//     429s only; a self-hosted server by its own slots or queue
//     (ServerSlots, ServerQueue) and, where it gives neither, by its
//     latency per output token against a baseline re-learned at the same
//     or a lower concurrency (latency.go). Whatever lowered it, the limit
//     doubles back every window that used it fully.
//
// The package sits below the providers (provider/openai, provider/httpjson)
// and imports nothing of ours; the bridge reads Snapshot for status, metrics
// and its log. A Governor is safe for concurrent use.
//
// Layer: provider.
package pace
