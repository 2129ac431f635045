//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package wasmdec

// heap is a Go slice grown by copying, at most to the limit.
type heap struct {
	b     []byte
	limit uint64
}

func reserve(limit uint64) (backing, error) { return &heap{limit: limit}, nil }

func (h *heap) grow(size uint64) []byte {
	if size > h.limit {
		return nil
	}
	if size > uint64(cap(h.b)) {
		n := make([]byte, size, min(h.limit, max(size, 2*uint64(cap(h.b)))))
		copy(n, h.b)
		h.b = n
	}
	h.b = h.b[:size]
	return h.b
}

func (h *heap) free() { h.b = nil }
