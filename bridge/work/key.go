package work

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/pgimageai/pgimageai/functions"
)

// Key identifies identical work: the same function, model, prompt, image
// bytes and what the function makes of them before the call (the model's
// effective normalisation settings). Results, permanent failures and stored inputs are remembered by it
// (pgimageai.results.input_key, pgimageai.errors.input_key).
type Key [sha256.Size]byte

// KeyOf returns the Key of a call of fn of model (the rule's ModelKey) with
// prompt on img, made into input (functions.Function.InputVersion) first.
// Each string is length-prefixed, so no two different tuples give the same
// digest input.
func KeyOf(fn functions.Name, model, input, prompt string, img []byte) Key {
	h := sha256.New()
	for _, s := range []string{string(fn), model, input, prompt} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write(img)
	var k Key
	h.Sum(k[:0])
	return k
}

// KeyFor returns the Key of a call of rule r with prompt on img.
func KeyFor(r Ruled, prompt string, img []byte) Key {
	w := r.Ref()
	return KeyOf(w.Fn, w.ModelKey, w.Input, prompt, img)
}
