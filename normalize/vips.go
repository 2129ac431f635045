//go:build cgo && !nodynamic

package normalize

/*
#cgo pkg-config: vips
#include <malloc.h>
#include <stdlib.h>
#include <vips/vips.h>

static void pgi_quiet(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer data) {}

// pgi_init starts libvips bounded: no operation cache (every image is seen
// once), one worker thread per pipeline, the loaders an image may reach
// limited to JPEG and HEIF (nothing untrusted: ImageMagick, PDF and the
// like are blocked even where their modules are installed), and its log
// messages dropped (a hostile file must not write to the service's logs).
static int pgi_init(void) {
	// glibc's malloc: buffers of 1 MiB and more (a decoder's planes and
	// frames) mapped and unmapped with each image, and two arenas, not one
	// per thread that ever called libvips: what an image took is given back
	// to the system after it instead of kept for the next.
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_ARENA_MAX, 2);
	if (VIPS_INIT("pgimageai"))
		return -1;
	vips_cache_set_max(0);
	vips_cache_set_max_mem(0);
	vips_cache_set_max_files(0);
	vips_concurrency_set(1);
	vips_block_untrusted_set(TRUE);
	vips_operation_block_set("VipsForeignLoad", TRUE);
	vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
	vips_operation_block_set("VipsForeignLoadHeif", FALSE);
	g_log_set_handler("VIPS", G_LOG_LEVEL_MASK, pgi_quiet, NULL);
	g_log_set_handler("GLib-GObject", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG, pgi_quiet, NULL);
	return 0;
}

static int pgi_has(const char *nickname) {
	return vips_type_find("VipsOperation", nickname) != 0;
}

// pgi_thumb decodes buf (shrinking on load where the format can), scales it
// to exactly w x h as shown (its orientation applied unless norot), and
// saves it stripped of metadata: PNG (compression 1) when png is 1, or
// when it is 2 and the image has alpha; else JPEG at quality q.
static int pgi_thumb(void *buf, size_t len, int w, int h, int norot, int png, int q,
		void **out, size_t *outlen, int *ow, int *oh, int *saved_png) {
	VipsImage *t = NULL;
	int ret;
	if (vips_thumbnail_buffer(buf, len, &t, w, "height", h, "size", VIPS_SIZE_FORCE,
			"no_rotate", norot, "option_string", "fail_on=error", NULL)) {
		vips_thread_shutdown();
		return -1;
	}
	*ow = vips_image_get_width(t);
	*oh = vips_image_get_height(t);
	*saved_png = png == 1 || (png == 2 && vips_image_hasalpha(t));
	if (*saved_png)
		ret = vips_pngsave_buffer(t, out, outlen, "compression", 1, "strip", TRUE, NULL);
	else
		// 4:2:0, as the Go encoder writes: libvips would keep the chroma
		// whole at quality 90 and more, some 40% more bytes for no pixel a
		// model tells apart.
		ret = vips_jpegsave_buffer(t, out, outlen, "Q", q, "strip", TRUE,
			"subsample_mode", VIPS_FOREIGN_SUBSAMPLE_ON, NULL);
	g_object_unref(t);
	vips_thread_shutdown();
	return ret;
}

static char *pgi_error(void) {
	char *s = vips_error_buffer_copy();
	return s;
}
*/
import "C"

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/pgimageai/pgimageai/magic"
)

// The smallest HEIC and AVIF images: decoded once when libvips starts, so
// that a libvips without the HEIF module or without an AV1 decoder behind
// libheif leaves those formats to the WebAssembly decoders instead of
// failing every image.
var (
	//go:embed probe/tiny.heic
	probeHEIC []byte
	//go:embed probe/tiny.avif
	probeAVIF []byte
)

const vipsBuilt = true

type vipsState struct {
	err     error
	version string
	formats map[magic.Format]bool
}

var vipsStart = sync.OnceValue(func() vipsState {
	if C.pgi_init() != 0 {
		return vipsState{err: fmt.Errorf("libvips did not start: %s", vipsError())}
	}
	st := vipsState{
		version: fmt.Sprintf("%d.%d.%d", int(C.vips_version(0)), int(C.vips_version(1)), int(C.vips_version(2))),
		formats: map[magic.Format]bool{magic.JPEG: true},
	}
	name := C.CString("heifload_buffer")
	defer C.free(unsafe.Pointer(name))
	if C.pgi_has(name) != 0 {
		for f, probe := range map[magic.Format][]byte{magic.HEIF: probeHEIC, magic.AVIF: probeAVIF} {
			if _, err := vipsThumb(context.Background(), probe, 8, 8, false, 0, 90); err == nil {
				st.formats[f] = true
			}
		}
	}
	return st
})

// vipsHandles reports whether libvips normalises images of format f.
func vipsHandles(f magic.Format) bool {
	st := vipsStart()
	return st.err == nil && st.formats[f]
}

// backendName names the image backend, for --version and the start-up line.
func backendName() string {
	st := vipsStart()
	if st.err != nil {
		return "pure Go and WebAssembly (" + st.err.Error() + ")"
	}
	var fs []string
	for _, f := range []magic.Format{magic.JPEG, magic.HEIF, magic.AVIF} {
		if st.formats[f] {
			fs = append(fs, f.String())
		}
	}
	return fmt.Sprintf("libvips %s (%s; the rest pure Go)", st.version, strings.Join(fs, ", "))
}

func vipsDecoderName(f magic.Format) string {
	if f == magic.JPEG {
		return "libvips " + vipsStart().version + " (libjpeg)"
	}
	return "libvips " + vipsStart().version + " (libheif)"
}

func vipsError() string {
	s := C.pgi_error()
	if s == nil {
		return "unknown error"
	}
	defer C.g_free(C.gpointer(s))
	return strings.TrimSpace(C.GoString(s))
}

// vipsOut is what libvips made.
type vipsOut struct {
	data []byte
	w, h int
	png  bool
}

// vipsThumb runs one thumbnail and save. png: 0 JPEG, 1 PNG, 2 PNG when the
// image has alpha. libvips cannot be stopped inside a decode: at the end of
// ctx the call returns ctx's error at once and the decode finishes on its
// own, its result dropped.
func vipsThumb(ctx context.Context, img []byte, w, h int, norot bool, png, q int) (vipsOut, error) {
	if err := ctx.Err(); err != nil {
		return vipsOut{}, err
	}
	if len(img) == 0 {
		return vipsOut{}, errors.New("no data")
	}
	type answer struct {
		out vipsOut
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var buf unsafe.Pointer
		var n C.size_t
		var ow, oh, savedPNG C.int
		nr := C.int(0)
		if norot {
			nr = 1
		}
		// img is pinned for the call (cgo passes Go memory that holds no
		// Go pointers); libvips copies nothing out of it after returning.
		rc := C.pgi_thumb(unsafe.Pointer(&img[0]), C.size_t(len(img)), C.int(w), C.int(h), nr, C.int(png), C.int(q),
			&buf, &n, &ow, &oh, &savedPNG)
		if rc != 0 {
			done <- answer{err: errors.New(vipsError())}
			return
		}
		data := C.GoBytes(buf, C.int(n))
		C.g_free(C.gpointer(buf))
		done <- answer{out: vipsOut{data: data, w: int(ow), h: int(oh), png: savedPNG != 0}}
	}()
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		return vipsOut{}, ctx.Err()
	}
}
