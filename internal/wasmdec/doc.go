// Package wasmdec decodes HEIF (HEVC in HEIF: libheif 1.18.2 and libde265
// 1.0.15) and AVIF (libavif 1.1.1 and libaom 3.10.0) images with the
// WebAssembly builds of github.com/gen2brain/heic v0.4.5 and
// github.com/gen2brain/avif v0.4.4, run by wazero, with two bounds those
// packages do not give: every decode runs in its own module instance whose
// linear memory may not grow past the caller's limit, and it is ended when
// the caller's context is done.
//
// It is a minimal fork of the two packages' wazero paths (MIT licence,
// LICENSE.gen2brain): the same WebAssembly modules (lib/, each library's
// licence beside it: libheif and libde265 LGPL-3.0, libavif and libaom
// BSD-2-Clause) and the same C entry points (lib/heif.c, lib/avif.c), called
// the same way. What differs: the runtime and the module instance are
// configured here (wazero.RuntimeConfig.WithMemoryLimitPages,
// WithCloseOnContextDone, and a per-instance memory allocator that refuses
// to grow past the limit); the decoded planes are copied out of the module
// before it is closed; the modules' stdout and stderr are discarded (a
// hostile file must not write to the service's logs); the packages' purego
// path, which loads a shared libheif or libavif when one is installed and
// runs it without any bound, is not there; and nothing registers with
// image.RegisterFormat.
//
// The linear memory of an instance is mapped outside the Go heap on Unix
// (mmap, pages touched only as the decoder writes them, unmapped when the
// instance closes) and is a Go slice elsewhere.
//
// In the flow it sits under package normalize, which calls it after the
// image's header passed its checks. Everything in it is safe for concurrent
// use.
//
// Layer: toolkit.
package wasmdec
