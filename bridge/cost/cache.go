package cost

import (
	"container/list"
	"context"
	"sync"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
)

// Cache remembers results (an LRU bounded by entries and by bytes) and
// collapses identical calls in flight into one (single flight), so the same
// (function, model, prompt, image) costs one provider call. Permanent
// failures (functions.Permanent) are remembered too, so that a row whose
// answer was unusable is not paid for again; transient ones are not: a later
// identical call tries again. It is safe for concurrent use.
type Cache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	bytes    int64
	lru      *list.List // of *entry, most recent first
	entries  map[work.Key]*list.Element
	inflight map[work.Key]*flight
	hits     int64
}

type entry struct {
	key    work.Key
	result functions.Result
	err    error // a permanent failure
	size   int64
}

// entryOverhead is what an entry costs beside its text or vector: the key,
// the list element and the map slot.
const entryOverhead = 128

func sizeOf(r functions.Result, err error) int64 {
	n := entryOverhead + int64(len(r.Text)) + 4*int64(len(r.Vector))
	if err != nil {
		n += int64(len(err.Error()))
	}
	return n
}

type flight struct {
	done   chan struct{}
	result functions.Result
	err    error
}

// NewCache returns a cache of at most maxEntries results and maxBytes bytes;
// maxEntries 0 remembers nothing (identical calls in flight still collapse).
func NewCache(maxEntries int, maxBytes int64) *Cache {
	return &Cache{max: maxEntries, maxBytes: maxBytes, lru: list.New(), entries: map[work.Key]*list.Element{}, inflight: map[work.Key]*flight{}}
}

// Do returns the cached result for k, waits for an identical call in flight,
// or runs call and caches its success. hit reports whether no call was made.
func (c *Cache) Do(ctx context.Context, k work.Key, call func() (functions.Result, error)) (r functions.Result, hit bool, err error) {
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		c.mu.Unlock()
		en := el.Value.(*entry)
		return en.result, true, en.err
	}
	if f, ok := c.inflight[k]; ok {
		c.hits++
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.result, true, f.err
		case <-ctx.Done():
			return functions.Result{}, false, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[k] = f
	c.mu.Unlock()

	f.result, f.err = call()

	c.mu.Lock()
	delete(c.inflight, k)
	if f.err == nil || functions.Permanent(f.err) {
		c.put(k, f.result, f.err)
	}
	c.mu.Unlock()
	close(f.done)
	return f.result, false, f.err
}

// put remembers a result or a permanent failure. c.mu is held.
func (c *Cache) put(k work.Key, r functions.Result, err error) {
	size := sizeOf(r, err)
	if c.max <= 0 || size > c.maxBytes {
		return
	}
	if el, ok := c.entries[k]; ok {
		old := c.lru.Remove(el).(*entry)
		c.bytes -= old.size
	}
	c.entries[k] = c.lru.PushFront(&entry{key: k, result: r, err: err, size: size})
	c.bytes += size
	for c.lru.Len() > c.max || c.bytes > c.maxBytes {
		old := c.lru.Remove(c.lru.Back()).(*entry)
		delete(c.entries, old.key)
		c.bytes -= old.size
	}
}

// Fail remembers a permanent failure read back from the errors table, so
// that it is not paid for again after a restart.
func (c *Cache) Fail(k work.Key, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok {
		c.put(k, functions.Result{Null: true}, err)
	}
}

// Forget drops what the cache remembers for k: `pgimageai retry` asks for
// the call again.
func (c *Cache) Forget(k work.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		old := c.lru.Remove(el).(*entry)
		delete(c.entries, k)
		c.bytes -= old.size
	}
}

// Stats returns the number of hits so far and the entries held.
func (c *Cache) Stats() (hits int64, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.lru.Len()
}
