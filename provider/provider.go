package provider

import (
	"context"

	"github.com/pgimageai/pgimageai/provider/pace"
	"github.com/pgimageai/pgimageai/value"
)

// Image is a validated image handed to a provider: its bytes and media type
// ("image/png", "image/jpeg", "image/gif" or "image/webp").
type Image struct {
	Data []byte
	MIME string
}

// Usage is the token accounting a provider reported for one call.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// Completion is the answer of a TextGenerator.
type Completion struct {
	Text  string
	Usage Usage
}

// Embedding is the answer of an Embedder.
type Embedding struct {
	Vector []float32
	Usage  Usage
}

// TextGenerator turns an image and a prompt into text: the capability behind
// AI_IMAGE_COMPLETE (SupportsImageTextGeneration in the design pgimageai
// follows). Implementations are safe for concurrent use and bound their own
// concurrency.
type TextGenerator interface {
	GenerateText(ctx context.Context, img Image, prompt string) (Completion, error)
}

// Embedder turns an image into a vector: the capability behind AI_IMAGE_EMBED
// (SupportsImageEmbedding). Implementations are safe for concurrent use.
type Embedder interface {
	EmbedImage(ctx context.Context, img Image) (Embedding, error)
}

// MemoryCoster is implemented by a provider whose calls hold memory in this
// process beyond the request that carries the image — the local provider
// decodes it. CallMemory returns, from the image's header, the bytes one call
// on img may allocate, so that the byte budget can charge them.
type MemoryCoster interface {
	CallMemory(img []byte) int64
}

// Parallel is implemented by a provider that can make use of more calls at
// once than its max_concurrency: one that batches concurrent calls into one
// request (max_concurrency × batch_size). The bridge runs at most
// Parallelism() calls of a model at once, on that many workers; a provider
// without the method gets its max_concurrency.
type Parallel interface {
	Parallelism() int
}

// Paced is implemented by a provider whose requests a governor paces
// (provider/pace): the bridge reads its Snapshot for status, metrics and
// the log.
type Paced interface {
	Pace() *pace.Governor
}

// Provider is a configured provider: a value that implements TextGenerator,
// Embedder or both. Callers discover capabilities with type assertions, once,
// when a rule is loaded.
type Provider any

// Model is one row of pgimageai.models.
type Model = value.Model

// Env looks up an environment variable; os.LookupEnv in production, a map in tests.
type Env func(name string) (string, bool)
