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
//   - latency: the concurrency limit grows while latency holds and shrinks
//     when it climbs (a gradient limiter in the manner of Netflix's
//     concurrency-limits: the short-term latency against a long-term
//     baseline).
//
// The package sits below the providers (provider/openai, provider/httpjson)
// and imports nothing of ours; the bridge reads Snapshot for status, metrics
// and its log. A Governor is safe for concurrent use.
package pace
