//go:build cgo && !nodynamic

package normalize

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

// libvips is not linked: it is opened with dlopen at the first image that
// needs it, so that a bridge that never sees a JPEG, HEIC or AVIF never
// maps its hundred libraries (some 30 MiB resident), and a host without it
// runs the pure-Go and WebAssembly decoders. The few functions used are
// declared here from libvips 8.x's ABI (soname libvips.so.42), which is
// checked at load: vips_version(3) - vips_version(5) is 42 for every 8.x.

typedef struct _VipsImage VipsImage;

// Values of libvips' enums (vips/resample.h, vips/foreign.h) and glib's
// log levels (glib/gmessages.h).
enum { PGI_SIZE_FORCE = 3, PGI_SUBSAMPLE_ON = 1 };
enum { PGI_LOG_LEVEL_MASK = ~3, PGI_LOG_QUIET = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) };

static struct {
	int (*init)(const char *);
	int (*version)(int);
	void (*cache_set_max)(int);
	void (*cache_set_max_mem)(size_t);
	void (*cache_set_max_files)(int);
	void (*concurrency_set)(int);
	void (*block_untrusted_set)(int);
	void (*operation_block_set)(const char *, int);
	unsigned long (*type_find)(const char *, const char *);
	int (*thumbnail_buffer)(void *, size_t, VipsImage **, int, ...);
	int (*image_get_width)(const VipsImage *);
	int (*image_get_height)(const VipsImage *);
	int (*image_hasalpha)(VipsImage *);
	int (*pngsave_buffer)(VipsImage *, void **, size_t *, ...);
	int (*jpegsave_buffer)(VipsImage *, void **, size_t *, ...);
	void (*thread_shutdown)(void);
	char *(*error_buffer_copy)(void);
	unsigned (*log_set_handler)(const char *, int, void (*)(const char *, int, const char *, void *), void *);
	void (*object_unref)(void *);
	void (*free)(void *);
} pgi;

static char pgi_why[256];

static void pgi_quiet(const char *domain, int level, const char *msg, void *data) {}

#define PGI_SYM(field, name) \
	if (!(*(void **)&pgi.field = dlsym(h, name))) { \
		snprintf(pgi_why, sizeof pgi_why, "libvips.so.42 has no %s", name); \
		return -1; \
	}

// pgi_load opens libvips and finds its functions; on failure pgi_why says why.
static int pgi_load(void) {
	void *h = dlopen("libvips.so.42", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(pgi_why, sizeof pgi_why, "%s", e ? e : "libvips.so.42 not found");
		return -1;
	}
	PGI_SYM(init, "vips_init")
	PGI_SYM(version, "vips_version")
	PGI_SYM(cache_set_max, "vips_cache_set_max")
	PGI_SYM(cache_set_max_mem, "vips_cache_set_max_mem")
	PGI_SYM(cache_set_max_files, "vips_cache_set_max_files")
	PGI_SYM(concurrency_set, "vips_concurrency_set")
	PGI_SYM(block_untrusted_set, "vips_block_untrusted_set")
	PGI_SYM(operation_block_set, "vips_operation_block_set")
	PGI_SYM(type_find, "vips_type_find")
	PGI_SYM(thumbnail_buffer, "vips_thumbnail_buffer")
	PGI_SYM(image_get_width, "vips_image_get_width")
	PGI_SYM(image_get_height, "vips_image_get_height")
	PGI_SYM(image_hasalpha, "vips_image_hasalpha")
	PGI_SYM(pngsave_buffer, "vips_pngsave_buffer")
	PGI_SYM(jpegsave_buffer, "vips_jpegsave_buffer")
	PGI_SYM(thread_shutdown, "vips_thread_shutdown")
	PGI_SYM(error_buffer_copy, "vips_error_buffer_copy")
	PGI_SYM(log_set_handler, "g_log_set_handler")
	PGI_SYM(object_unref, "g_object_unref")
	PGI_SYM(free, "g_free")
	if (pgi.version(0) != 8 || pgi.version(3) - pgi.version(5) != 42) {
		snprintf(pgi_why, sizeof pgi_why, "libvips %d.%d has ABI %d, not 42 (libvips 8.x)",
			pgi.version(0), pgi.version(1), pgi.version(3) - pgi.version(5));
		return -1;
	}
	return 0;
}

static const char *pgi_load_error(void) { return pgi_why; }

static int pgi_version(int i) { return pgi.version(i); }

static void pgi_free(void *p) { pgi.free(p); }

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
	if (pgi.init("pgimageai"))
		return -1;
	pgi.cache_set_max(0);
	pgi.cache_set_max_mem(0);
	pgi.cache_set_max_files(0);
	pgi.concurrency_set(1);
	pgi.block_untrusted_set(1);
	pgi.operation_block_set("VipsForeignLoad", 1);
	pgi.operation_block_set("VipsForeignLoadJpeg", 0);
	pgi.operation_block_set("VipsForeignLoadHeif", 0);
	pgi.log_set_handler("VIPS", PGI_LOG_LEVEL_MASK, pgi_quiet, NULL);
	pgi.log_set_handler("GLib-GObject", PGI_LOG_QUIET, pgi_quiet, NULL);
	return 0;
}

static int pgi_has(const char *nickname) {
	return pgi.type_find("VipsOperation", nickname) != 0;
}

// pgi_thumb decodes buf (shrinking on load where the format can), scales it
// to exactly w x h as shown (its orientation applied unless norot), and
// saves it stripped of metadata: PNG (compression 1) when png is 1, or
// when it is 2 and the image has alpha; else JPEG at quality q.
static int pgi_thumb(void *buf, size_t len, int w, int h, int norot, int png, int q,
		void **out, size_t *outlen, int *ow, int *oh, int *saved_png) {
	VipsImage *t = NULL;
	int ret;
	if (pgi.thumbnail_buffer(buf, len, &t, w, "height", h, "size", PGI_SIZE_FORCE,
			"no_rotate", norot, "option_string", "fail_on=error", NULL)) {
		pgi.thread_shutdown();
		return -1;
	}
	*ow = pgi.image_get_width(t);
	*oh = pgi.image_get_height(t);
	*saved_png = png == 1 || (png == 2 && pgi.image_hasalpha(t));
	if (*saved_png)
		ret = pgi.pngsave_buffer(t, out, outlen, "compression", 1, "strip", 1, NULL);
	else
		// 4:2:0, as the Go encoder writes: libvips would keep the chroma
		// whole at quality 90 and more, some 40% more bytes for no pixel a
		// model tells apart.
		ret = pgi.jpegsave_buffer(t, out, outlen, "Q", q, "strip", 1,
			"subsample_mode", PGI_SUBSAMPLE_ON, NULL);
	pgi.object_unref(t);
	pgi.thread_shutdown();
	return ret;
}

static char *pgi_error(void) {
	return pgi.error_buffer_copy();
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
	"sync/atomic"
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

// vipsStarted is set once vipsStart has run (libvips opened or found
// missing), so that a report of the backend need not start it.
var vipsStarted atomic.Bool

var vipsStart = sync.OnceValue(func() vipsState {
	st := vipsOpen()
	// The hook first: a hook that asks BackendSoFar is told libvips is yet
	// to start instead of waiting on this Once.
	if hook := startHook.Load(); hook != nil {
		(*hook)(backendOf(st))
	}
	vipsStarted.Store(true)
	return st
})

// vipsOpen opens and starts libvips, and finds which formats it reads.
func vipsOpen() vipsState {
	if C.pgi_load() != 0 {
		return vipsState{err: fmt.Errorf("no libvips: %s", C.GoString(C.pgi_load_error()))}
	}
	if C.pgi_init() != 0 {
		return vipsState{err: fmt.Errorf("libvips did not start: %s", vipsError())}
	}
	st := vipsState{
		version: fmt.Sprintf("%d.%d.%d", int(C.pgi_version(0)), int(C.pgi_version(1)), int(C.pgi_version(2))),
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
}

// vipsHandles reports whether libvips normalises images of format f. Only
// an image of a format libvips may read opens it.
func vipsHandles(f magic.Format) bool {
	if f != magic.JPEG && f != magic.HEIF && f != magic.AVIF {
		return false
	}
	st := vipsStart()
	return st.err == nil && st.formats[f]
}

// backendName names the image backend, opening libvips to see.
func backendName() string { return backendOf(vipsStart()) }

// backendSoFar names the image backend without opening libvips: what
// backendName says once it is open, and until then that it will be.
func backendSoFar() string {
	if vipsStarted.Load() {
		return backendName()
	}
	return "libvips.so.42 at the first JPEG, HEIC or AVIF, else pure Go and WebAssembly"
}

func backendOf(st vipsState) string {
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
	defer C.pgi_free(unsafe.Pointer(s))
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
		C.pgi_free(buf)
		done <- answer{out: vipsOut{data: data, w: int(ow), h: int(oh), png: savedPNG != 0}}
	}()
	select {
	case a := <-done:
		return a.out, a.err
	case <-ctx.Done():
		return vipsOut{}, ctx.Err()
	}
}
