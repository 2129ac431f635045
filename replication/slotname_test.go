package replication

import (
	"regexp"
	"strings"
	"testing"
)

func TestDefaultSlotName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	tests := []struct {
		name, db, group string
		prefix          string
	}{
		{"default group", "shop", "default", "pgimageai_shop_"},
		{"another group", "shop", "thumbs", "pgimageai_shop_thumbs_"},
		{"upper case and punctuation", "Shop-EU 2", "default", "pgimageai_shop_eu_2_"},
		{"non-ASCII", "фото", "default", "pgimageai_"},
		{"long", strings.Repeat("d", 80), "default", "pgimageai_ddd"},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DefaultSlotName(tt.db, tt.group, "default")
			if !valid.MatchString(got) || !strings.HasPrefix(got, tt.prefix) {
				t.Fatalf("DefaultSlotName(%q, %q) = %q: want a valid slot name starting %q", tt.db, tt.group, got, tt.prefix)
			}
			if other, dup := seen[got]; dup {
				t.Fatalf("%q is also the name of %s", got, other)
			}
			seen[got] = tt.name
		})
	}
	// Names that read alike once sanitised never share a slot.
	alike := [][3]string{{"Shop", "default", ""}, {"shop", "default", ""}, {"a_b", "default", ""}, {"a", "b", ""}, {"a b", "default", ""}}
	names := map[string]bool{}
	for _, a := range alike {
		n := DefaultSlotName(a[0], a[1], "default")
		if names[n] {
			t.Fatalf("two databases share slot %s", n)
		}
		names[n] = true
	}
	if DefaultSlotName("shop", "default", "default") != DefaultSlotName("shop", "default", "default") {
		t.Fatal("the name is not stable")
	}
}

func TestLegacySlotName(t *testing.T) {
	if got := LegacySlotName("default", "default"); got != "pgimageai" {
		t.Fatalf("legacy default = %q", got)
	}
	if got := LegacySlotName("thumbs", "default"); got != "pgimageai_thumbs" {
		t.Fatalf("legacy group = %q", got)
	}
}
