package render

import (
	"fmt"
	"strings"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/internal/bytesize"
)

// UninstallText lists the plan, one line per object.
func UninstallText(p bridge.UninstallPlan, dropping bool) string {
	var b strings.Builder
	verb := "would drop"
	if dropping {
		verb = "dropping"
	}
	for _, g := range p.Groups {
		switch {
		case !g.SlotFound:
			fmt.Fprintf(&b, "slot %s (group %s): does not exist\n", g.Slot, g.Group)
		case g.SlotActive:
			fmt.Fprintf(&b, "slot %s (group %s): %s; it is active (a pgimageai run streams it: stop it first); it retains %s of WAL\n", g.Slot, g.Group, verb, bytesize.Format(g.RetainedBytes))
		default:
			fmt.Fprintf(&b, "slot %s (group %s): %s; it retains %s of WAL\n", g.Slot, g.Group, verb, bytesize.Format(g.RetainedBytes))
		}
		if g.PublicationFound {
			fmt.Fprintf(&b, "publication %s: %s\n", g.Publication, verb)
		} else {
			fmt.Fprintf(&b, "publication %s: does not exist\n", g.Publication)
		}
	}
	if !p.Schema {
		b.WriteString("schema pgimageai: kept (--drop-schema drops it, with every rule, model, result and error)\n")
		return b.String()
	}
	switch {
	case p.SameDatabase && p.SchemaSource:
		fmt.Fprintf(&b, "schema pgimageai: %s, with every rule, model, result, error and checkpoint\n", verb)
	case p.SameDatabase:
		b.WriteString("schema pgimageai: does not exist\n")
	default:
		for _, s := range []struct {
			where  string
			exists bool
		}{{"source", p.SchemaSource}, {"target", p.SchemaTarget}} {
			if s.exists {
				fmt.Fprintf(&b, "schema pgimageai on the %s: %s\n", s.where, verb)
			} else {
				fmt.Fprintf(&b, "schema pgimageai on the %s: does not exist\n", s.where)
			}
		}
	}
	for _, t := range p.CreatedTargets {
		fmt.Fprintf(&b, "target table %s (created by the bridge): kept; DROP TABLE %s; removes it\n", t, t)
	}
	return b.String()
}
