package engine

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"slices"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/replication"
)

// The per-change decision, decided before it is done: decide looks at what an
// INSERT or UPDATE carries for one rule and says what to do and what to read
// first, without any I/O; engine.rowResult does it (reads the source row,
// starts the call, routes the item).

// act is what an INSERT or UPDATE calls for, for one rule.
type act uint8

const (
	actNone     act = iota + 1 // nothing the rule reads changed: no item, no call
	actNull                    // a NULL result without a call (a NULL image)
	actCall                    // call the rule's function with an image and a prompt
	actFetch                   // read columns of the source row (unchanged TOAST), then decide again
	actTooLarge                // a too_large result without a call: the fetched image is over max_image_bytes, unread
)

func (a act) String() string {
	switch a {
	case actNone:
		return "none"
	case actNull:
		return "null"
	case actCall:
		return "call"
	case actFetch:
		return "fetch"
	case actTooLarge:
		return "too_large"
	}
	return "invalid"
}

// rowChange is what decide knows of one INSERT or UPDATE, for one rule.
type rowChange struct {
	op       replication.Op
	image    replication.Value  // the new row's image column
	oldImage *replication.Value // the old row's, when the change carries it (REPLICA IDENTITY FULL)
	// values are the template's columns that arrived, as text; unchanged
	// those that arrived as unchanged TOAST (their values are not in the
	// change). Both empty for a rule without a template.
	values    map[string]string
	unchanged []string
	// lastPrompt is the digest of the row's last prompt for the rule
	// (promptMemo); nil when none is remembered.
	lastPrompt *[sha256.Size]byte
	// fetched is what was read from the source row after an actFetch; nil
	// before.
	fetched *fetchedRow
}

// fetchedRow is what was read of the source row for an actFetch.
type fetchedRow struct {
	values    map[string]string // the template's unchanged columns, as text
	image     []byte            // the image column, when it was asked for
	imageNull bool              // the image column, asked for, is NULL
	over      *oversized        // the image column, asked for, is over max_image_bytes: not read
}

// oversized is an image over max_image_bytes that was not read: its length
// and first bytes.
type oversized struct {
	size int
	head []byte
}

// decision is what decide says to do.
type decision struct {
	act   act
	fetch []string // actFetch: the source row's columns to read
	image []byte   // actCall: the image to send
	// prompt is the prompt of an actCall, and of an actNull of a rule with a
	// template (rendered from the row).
	prompt string
	// remember asks to store prompt as the row's last prompt (promptMemo)
	// before acting: set whenever a template was rendered and acted on.
	remember bool
	over     *oversized // actTooLarge: the image not read
}

// decide says what change c means for rule r. It does no I/O: when values
// that the change did not carry (unchanged TOAST) are needed, it returns
// actFetch with the columns to read; the caller reads them into c.fetched
// and calls decide again (a row deleted since needs no second call: its
// DELETE follows). The error is that of an image column that does not
// decode.
//
// Without a template: an unchanged image calls for nothing (the result
// stays), a NULL image for a NULL result, an UPDATE whose old row shows the
// same image bytes for nothing, other bytes for a call.
//
// With a template, the prompt depends on the row too: a change that carries
// neither the image nor any column the prompt names calls for nothing;
// otherwise the values not carried are fetched and the prompt rendered. Then
// an unchanged image whose rendered prompt is the row's last calls for
// nothing, and anything else for a call (or a NULL result for a NULL image)
// with the new prompt, remembered.
func decide(r *rules.Rule, c rowChange) (decision, error) {
	prompt := r.Prompt
	if r.Template == nil {
		switch {
		case c.image.Kind == replication.Unchanged:
			return decision{act: actNone}, nil // unchanged TOASTed image: no call, result untouched
		case c.image.Kind == replication.Null:
			return decision{act: actNull}, nil
		case c.op == replication.Update && c.oldImage != nil && sameBytes(*c.oldImage, c.image):
			return decision{act: actNone}, nil // identical image bytes (REPLICA IDENTITY FULL)
		}
		img, err := c.image.Bytea()
		if err != nil {
			return decision{}, err
		}
		return decision{act: actCall, image: img, prompt: prompt}, nil
	}

	imageUnchanged := c.image.Kind == replication.Unchanged
	if imageUnchanged && len(c.unchanged) == len(r.Template.Columns()) {
		return decision{act: actNone}, nil // nothing the rule reads arrived: nothing changed for it
	}
	if c.fetched == nil {
		need := slices.Clone(c.unchanged)
		if imageUnchanged {
			need = append(need, r.ImageColumn)
		}
		if len(need) > 0 {
			return decision{act: actFetch, fetch: need}, nil
		}
	}
	vals := maps.Clone(c.values)
	if vals == nil {
		vals = map[string]string{}
	}
	if c.fetched != nil {
		for _, name := range c.unchanged {
			vals[name] = c.fetched.values[name]
		}
	}
	prompt = r.Template.Render(vals)
	if imageUnchanged {
		if c.lastPrompt != nil && *c.lastPrompt == sha256.Sum256([]byte(prompt)) {
			return decision{act: actNone}, nil // same image, same prompt
		}
		if c.fetched.imageNull {
			return decision{act: actNull, prompt: prompt, remember: true}, nil
		}
		if c.fetched.over != nil {
			return decision{act: actTooLarge, prompt: prompt, remember: true, over: c.fetched.over}, nil
		}
		return decision{act: actCall, image: c.fetched.image, prompt: prompt, remember: true}, nil
	}
	if c.image.Kind == replication.Null {
		return decision{act: actNull, prompt: prompt, remember: true}, nil
	}
	img, err := c.image.Bytea()
	if err != nil {
		return decision{}, err
	}
	return decision{act: actCall, image: img, prompt: prompt, remember: true}, nil
}

// sameBytes reports whether an UPDATE's old and new values are the same
// bytes; only a change that carries the old row (REPLICA IDENTITY FULL) can
// tell.
func sameBytes(old, cur replication.Value) bool {
	return (old.Kind == replication.Binary || old.Kind == replication.Text) && old.Kind == cur.Kind && bytes.Equal(old.Data, cur.Data)
}
