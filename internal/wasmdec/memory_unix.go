//go:build linux || darwin || freebsd || netbsd || openbsd

package wasmdec

import "syscall"

// mapped is a region reserved at once for the whole limit and never moved:
// a page takes memory only when the decoder first writes it, and all of it
// is given back when the instance closes, not at the next garbage
// collection.
type mapped struct{ b []byte }

func reserve(limit uint64) (backing, error) {
	if limit == 0 {
		return &mapped{}, nil
	}
	b, err := syscall.Mmap(-1, 0, int(limit), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
	if err != nil {
		return nil, err
	}
	return &mapped{b: b}, nil
}

func (m *mapped) grow(size uint64) []byte {
	if size > uint64(len(m.b)) {
		return nil
	}
	return m.b[:size:size]
}

func (m *mapped) free() {
	if m.b != nil {
		_ = syscall.Munmap(m.b)
		m.b = nil
	}
}
