package batch

import (
	"fmt"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// MaxWait bounds batch_wait: rows wait at most this long for others.
const MaxWait = 10 * time.Second

// Config holds the batching keys of models.options, embedded in the Config of
// providers that batch.
type Config struct {
	// BatchSize is the most inputs sent in one request; 1 = no batching.
	// 0 = the provider's default.
	BatchSize int `json:"batch_size,omitempty"`
	// BatchWait is how long the first input of a batch waits for others
	// before the batch is sent anyway; 0 = DefaultWait.
	BatchWait provider.Duration `json:"batch_wait,omitempty"`
}

// Validate reports the first invalid option; maxSize is the most inputs the
// provider's API accepts in one request.
func (o Config) Validate(maxSize int) error {
	switch {
	case o.BatchSize < 0 || o.BatchSize > maxSize:
		return fmt.Errorf("option batch_size: must be between 1 and %d, got %d", maxSize, o.BatchSize)
	case o.BatchWait < 0 || time.Duration(o.BatchWait) > MaxWait:
		return fmt.Errorf("option batch_wait: must be between 0s and %s, got %s", MaxWait, time.Duration(o.BatchWait))
	}
	return nil
}

// WithDefaults returns o with defSize and DefaultWait where unset.
func (o Config) WithDefaults(defSize int) Config {
	if o.BatchSize == 0 {
		o.BatchSize = defSize
	}
	if o.BatchWait == 0 {
		o.BatchWait = provider.Duration(DefaultWait)
	}
	return o
}
