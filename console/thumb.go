package console

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
)

// Thumbnails are made here from the source row's image, never sent whole:
// decoded by normalize (its decode bounded by the bytes it would allocate),
// scaled to fit ThumbSide × ThumbSide, and cached by the image's SHA-256.

const (
	// ThumbSide bounds a thumbnail's sides, in pixels.
	ThumbSide = 160
	// MaxImageBytes bounds the image the console reads for a thumbnail
	// (and the model's max_image_bytes bounds it too).
	MaxImageBytes = 32 << 20
	// thumbDecodeBytes bounds what one decode may allocate.
	thumbDecodeBytes = 128 << 20
	// thumbMaxBytes bounds a thumbnail's encoding: an image normalize
	// returned as stored (small already) is served only under it.
	thumbMaxBytes = 256 << 10
	// thumbCacheBytes bounds the cache.
	thumbCacheBytes = 32 << 20
)

var thumbSettings = normalize.Settings{Enabled: true, Size: normalize.Size{MaxSide: ThumbSide},
	Accept: []magic.Format{magic.JPEG, magic.PNG}, JPEGQuality: 80, MaxDecodedBytes: thumbDecodeBytes}

// thumbnail is a made thumbnail, or why none could be made of an image.
type thumbnail struct {
	data  []byte
	ctype string
	err   error
}

// thumbnailer makes and caches thumbnails. It is safe for concurrent use.
type thumbnailer struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of [32]byte, most recent first
	entries map[[32]byte]*cacheEntry
	decodes chan struct{} // one token per decode running
}

type cacheEntry struct {
	t   thumbnail
	pos *list.Element
}

func newThumbnailer(maxBytes int64) *thumbnailer {
	return &thumbnailer{max: maxBytes, order: list.New(), entries: map[[32]byte]*cacheEntry{},
		decodes: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))}
}

func (c *thumbnailer) lookup(sum [32]byte) (thumbnail, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sum]
	if !ok {
		return thumbnail{}, false
	}
	c.order.MoveToFront(e.pos)
	return e.t, true
}

func (c *thumbnailer) has(sum [32]byte) bool {
	_, ok := c.lookup(sum)
	return ok
}

// store keeps t under sum, dropping the least recently used past the bound.
func (c *thumbnailer) store(sum [32]byte, t thumbnail) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[sum]; ok {
		return
	}
	cost := int64(len(t.data)) + 128
	c.entries[sum] = &cacheEntry{t: t, pos: c.order.PushFront(sum)}
	c.size += cost
	for c.size > c.max && c.order.Len() > 1 {
		last := c.order.Back()
		k := last.Value.([32]byte)
		c.size -= int64(len(c.entries[k].t.data)) + 128
		delete(c.entries, k)
		c.order.Remove(last)
	}
}

// get returns the thumbnail of rule's source row keyed key.
func (c *thumbnailer) get(ctx context.Context, src Source, rule, key string) (thumbnail, error) {
	if rule == "" || key == "" || len(key) > 4096 {
		return thumbnail{}, ErrNoImage
	}
	img, err := src.Image(ctx, rule, key, c.has)
	if err != nil {
		return thumbnail{}, err
	}
	if img.Bytes == nil {
		if t, ok := c.lookup(img.Sum); ok {
			return t, t.err
		}
		// Evicted since: read the bytes after all.
		if img, err = src.Image(ctx, rule, key, func([32]byte) bool { return false }); err != nil {
			return thumbnail{}, err
		}
	}
	select {
	case c.decodes <- struct{}{}:
	case <-ctx.Done():
		return thumbnail{}, ctx.Err()
	}
	t := makeThumbnail(ctx, img.Bytes)
	<-c.decodes
	if ctx.Err() != nil {
		return thumbnail{}, ctx.Err() // cut short: nothing to remember
	}
	c.store(img.Sum, t)
	return t, t.err
}

// makeThumbnail scales img down to a thumbnail.
func makeThumbnail(ctx context.Context, img []byte) thumbnail {
	f, err := magic.Detect(img)
	if err != nil {
		return thumbnail{err: err}
	}
	res, err := normalize.Image(ctx, img, f, thumbSettings)
	if err != nil {
		return thumbnail{err: err}
	}
	// An image returned as stored (its header unread, or small already)
	// is served only when it is as small as a thumbnail.
	if res.Width <= 0 || res.Height <= 0 || res.Width > ThumbSide || res.Height > ThumbSide {
		return thumbnail{err: errors.New("no thumbnail: the image's size is unknown")}
	}
	if len(res.Data) > thumbMaxBytes {
		return thumbnail{err: fmt.Errorf("no thumbnail: %d bytes for %dx%d", len(res.Data), res.Width, res.Height)}
	}
	return thumbnail{data: res.Data, ctype: res.Format.MIME()}
}
