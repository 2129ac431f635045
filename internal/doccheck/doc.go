// Package doccheck holds the test that keeps the user's documentation honest:
// every relative link in README.md, CHANGELOG.md and docs/ points at a file
// that exists, every #anchor at a heading of that file, and every fenced code
// block is closed. It has no code of its own.
//
// Layer: toolkit.
package doccheck
