// Package normalize makes a stored image into what a model should be sent:
// upright (the EXIF orientation applied), no larger than the model looks at,
// in a format the model accepts, and without metadata (EXIF GPS and the like
// never leave the database). An image that needs none of this is returned as
// stored, byte for byte, without being decoded: what it needs is read from its
// header first.
//
// It sits between the magic-byte check (package magic) and the provider
// call: package functions calls Image per call with the model's Settings.
// Every decode is bounded by the bytes it would allocate, estimated from the
// header before any pixel is decoded (DecodedBytes): a HEIF or AVIF file's
// coded size is checked against its ispe box first (checkCoded), its
// WebAssembly decoder may not grow past the estimate, a JPEG's scans are
// counted (CheckJPEG), and every normalisation ends at a deadline
// (Settings.DecodeTimeout). It imports magic, golang.org/x/image and
// internal/wasmdec (the HEIF and AVIF decoders); nothing of the providers.
// Everything in it is safe for concurrent use.
//
// Layer: codec.
package normalize
