//go:build !cgo || nodynamic

package normalize

import (
	"context"
	"errors"

	"github.com/pgimageai/pgimageai/magic"
)

// A build without cgo, or with -tags nodynamic: no libvips; every format is
// decoded in Go or WebAssembly.

const vipsBuilt = false

func vipsHandles(magic.Format) bool { return false }

func backendName() string { return "pure Go and WebAssembly (libheif, libavif)" }

func vipsDecoderName(magic.Format) string { return "" }

type vipsOut struct {
	data []byte
	w, h int
	png  bool
}

func vipsThumb(context.Context, []byte, int, int, bool, int, int) (vipsOut, error) {
	return vipsOut{}, errors.New("built without libvips")
}

func backendSoFar() string { return backendName() }
