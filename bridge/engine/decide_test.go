package engine

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"slices"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/replication"
)

func TestDecide(t *testing.T) {
	plain := &rules.Rule{Config: rules.Config{Name: "plain", ImageColumn: "img", Prompt: "Describe."}}
	tpl := &rules.Rule{Config: rules.Config{Name: "tpl", ImageColumn: "img", Prompt: "Describe {{title}} by {{author}}."}, Template: mustTemplate(t, "Describe {{title}} by {{author}}.", "title", "author")}

	png := []byte{0x89, 'P', 'N', 'G'}
	bin := func(b []byte) replication.Value { return replication.Value{Kind: replication.Binary, Data: b} }
	null := replication.Value{Kind: replication.Null}
	unchanged := replication.Value{Kind: replication.Unchanged}
	digest := func(s string) *[sha256.Size]byte { d := sha256.Sum256([]byte(s)); return &d }

	tests := []struct {
		name    string
		rule    *rules.Rule
		change  rowChange
		want    decision
		wantErr bool
	}{
		// Without a template.
		{name: "NULL image: NULL result, no call",
			rule: plain, change: rowChange{op: replication.Insert, image: null},
			want: decision{act: actNull}},
		{name: "unchanged TOAST image: nothing",
			rule: plain, change: rowChange{op: replication.Update, image: unchanged},
			want: decision{act: actNone}},
		{name: "identical bytes (REPLICA IDENTITY FULL): nothing",
			rule: plain, change: rowChange{op: replication.Update, image: bin(png), oldImage: &replication.Value{Kind: replication.Binary, Data: slices.Clone(png)}},
			want: decision{act: actNone}},
		{name: "other bytes than the old row's: call",
			rule: plain, change: rowChange{op: replication.Update, image: bin(png), oldImage: &replication.Value{Kind: replication.Binary, Data: []byte("GIF89a")}},
			want: decision{act: actCall, image: png, prompt: "Describe."}},
		{name: "old row's image unchanged TOAST: call",
			rule: plain, change: rowChange{op: replication.Update, image: bin(png), oldImage: &unchanged},
			want: decision{act: actCall, image: png, prompt: "Describe."}},
		{name: "new bytes on INSERT: call with the rule's prompt",
			rule: plain, change: rowChange{op: replication.Insert, image: bin(png)},
			want: decision{act: actCall, image: png, prompt: "Describe."}},
		{name: "new bytes on UPDATE without the old row: call",
			rule: plain, change: rowChange{op: replication.Update, image: bin(png)},
			want: decision{act: actCall, image: png, prompt: "Describe."}},
		{name: "bytea in text form",
			rule: plain, change: rowChange{op: replication.Insert, image: replication.Value{Kind: replication.Text, Data: []byte(`\x0102`)}},
			want: decision{act: actCall, image: []byte{1, 2}, prompt: "Describe."}},
		{name: "bytea text that does not decode",
			rule: plain, change: rowChange{op: replication.Insert, image: replication.Value{Kind: replication.Text, Data: []byte(`\xZZ`)}},
			wantErr: true},

		// With a template.
		{name: "template: image and every column unchanged TOAST: nothing",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, unchanged: []string{"title", "author"}},
			want: decision{act: actNone}},
		{name: "template: unchanged image, a column changed: fetch the image",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset", "author": "Ann"}},
			want: decision{act: actFetch, fetch: []string{"img"}}},
		{name: "template: unchanged image and a column: fetch both",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset"}, unchanged: []string{"author"}},
			want: decision{act: actFetch, fetch: []string{"author", "img"}}},
		{name: "template: new image, a column unchanged TOAST: fetch that column",
			rule: tpl, change: rowChange{op: replication.Update, image: bin(png), values: map[string]string{"title": "Sunset"}, unchanged: []string{"author"}},
			want: decision{act: actFetch, fetch: []string{"author"}}},
		{name: "template: new image, the column fetched: call with the rendered prompt",
			rule: tpl, change: rowChange{op: replication.Update, image: bin(png), values: map[string]string{"title": "Sunset"}, unchanged: []string{"author"},
				fetched: &fetchedRow{values: map[string]string{"author": "Ann"}}},
			want: decision{act: actCall, image: png, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: memo says same prompt: nothing",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset", "author": "Ann"},
				lastPrompt: digest("Describe Sunset by Ann."), fetched: &fetchedRow{image: png}},
			want: decision{act: actNone}},
		{name: "template: memo holds another prompt: call with the fetched image",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunrise", "author": "Ann"},
				lastPrompt: digest("Describe Sunset by Ann."), fetched: &fetchedRow{image: png}},
			want: decision{act: actCall, image: png, prompt: "Describe Sunrise by Ann.", remember: true}},
		{name: "template: no memo: call with the fetched image",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset", "author": "Ann"},
				fetched: &fetchedRow{image: png}},
			want: decision{act: actCall, image: png, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: fetched image is NULL: NULL result",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset", "author": "Ann"},
				fetched: &fetchedRow{imageNull: true}},
			want: decision{act: actNull, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: fetched image over max_image_bytes, not read: too_large",
			rule: tpl, change: rowChange{op: replication.Update, image: unchanged, values: map[string]string{"title": "Sunset", "author": "Ann"},
				fetched: &fetchedRow{over: &oversized{size: 1 << 30, head: png}}},
			want: decision{act: actTooLarge, prompt: "Describe Sunset by Ann.", remember: true, over: &oversized{size: 1 << 30, head: png}}},
		{name: "template: every column carried: call, no fetch",
			rule: tpl, change: rowChange{op: replication.Insert, image: bin(png), values: map[string]string{"title": "Sunset", "author": "Ann"}},
			want: decision{act: actCall, image: png, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: NULL column renders empty",
			rule: tpl, change: rowChange{op: replication.Insert, image: bin(png), values: map[string]string{"title": "", "author": "Ann"}},
			want: decision{act: actCall, image: png, prompt: "Describe  by Ann.", remember: true}},
		{name: "template: NULL image: NULL result, prompt remembered",
			rule: tpl, change: rowChange{op: replication.Insert, image: null, values: map[string]string{"title": "Sunset", "author": "Ann"}},
			want: decision{act: actNull, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: identical bytes (REPLICA IDENTITY FULL) still call: the prompt may differ",
			rule: tpl, change: rowChange{op: replication.Update, image: bin(png), oldImage: &replication.Value{Kind: replication.Binary, Data: png},
				values: map[string]string{"title": "Sunset", "author": "Ann"}},
			want: decision{act: actCall, image: png, prompt: "Describe Sunset by Ann.", remember: true}},
		{name: "template: bytea text that does not decode",
			rule: tpl, change: rowChange{op: replication.Insert, image: replication.Value{Kind: replication.Text, Data: []byte(`\xZZ`)}, values: map[string]string{"title": "a", "author": "b"}},
			wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := maps.Clone(tt.change.values)
			got, err := decide(tt.rule, tt.change)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decide: err = %v, wantErr %t", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got.act != tt.want.act || !slices.Equal(got.fetch, tt.want.fetch) || !bytes.Equal(got.image, tt.want.image) ||
				got.prompt != tt.want.prompt || got.remember != tt.want.remember {
				t.Errorf("decide =\n  %s fetch=%q image=%q prompt=%q remember=%t, want\n  %s fetch=%q image=%q prompt=%q remember=%t",
					got.act, got.fetch, got.image, got.prompt, got.remember,
					tt.want.act, tt.want.fetch, tt.want.image, tt.want.prompt, tt.want.remember)
			}
			if !maps.Equal(tt.change.values, values) {
				t.Errorf("decide changed its input values: %v, was %v", tt.change.values, values)
			}
		})
	}
}

// TestDecideFetchDoesNotAlias checks that the columns to fetch are a new
// slice: appending the image column must not write into the change's.
func TestDecideFetchDoesNotAlias(t *testing.T) {
	tpl := &rules.Rule{Config: rules.Config{Name: "tpl", ImageColumn: "img"}, Template: mustTemplate(t, "{{a}} {{b}} {{c}}", "a", "b", "c")}
	unchanged := make([]string, 2, 8)
	copy(unchanged, []string{"a", "b"})
	c := rowChange{op: replication.Update, image: replication.Value{Kind: replication.Unchanged}, values: map[string]string{"c": "x"}, unchanged: unchanged}
	d, err := decide(tpl, c)
	if err != nil || d.act != actFetch {
		t.Fatalf("decide = %v, %v; want fetch", d.act, err)
	}
	if got := unchanged[:3][2]; got != "" {
		t.Errorf("decide appended %q into the change's unchanged columns", got)
	}
	if !slices.Equal(d.fetch, []string{"a", "b", "img"}) {
		t.Errorf("fetch = %q", d.fetch)
	}
}

func TestPromptMemoLast(t *testing.T) {
	var m promptMemo
	key := []byte(`{"id":1}`)
	if m.last("r", key) != nil {
		t.Fatal("empty memo remembers a prompt")
	}
	m.set("r", key, "p")
	tests := []struct {
		name string
		rule string
		key  []byte
		want *[sha256.Size]byte
	}{
		{"remembered", "r", key, func() *[sha256.Size]byte { d := sha256.Sum256([]byte("p")); return &d }()},
		{"other rule", "s", key, nil},
		{"other row", "r", []byte(`{"id":2}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.last(tt.rule, tt.key)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("last(%q, %s) = %x, want %x", tt.rule, tt.key, got, tt.want)
			}
		})
	}
}

// mustTemplate parses prompt against a table that has columns.
func mustTemplate(t testing.TB, prompt string, columns ...string) *rules.Template {
	t.Helper()
	table := &catalog.Table{Schema: "public", Name: "t"}
	for _, c := range columns {
		table.Columns = append(table.Columns, catalog.Column{Name: c, Type: "text"})
	}
	tpl, err := rules.ParseTemplate(prompt, table)
	if err != nil || tpl == nil {
		t.Fatalf("ParseTemplate(%q): %v", prompt, err)
	}
	return tpl
}
