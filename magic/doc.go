// Package magic detects image formats from their leading magic bytes and builds
// the data URLs that vision providers accept.
//
// It sits at the very start of the function pipeline: functions calls Detect
// before any provider is contacted, so an empty or unrecognised value never
// costs a provider call. It imports no other package of pgimageai.
//
// Layer: toolkit.
package magic
