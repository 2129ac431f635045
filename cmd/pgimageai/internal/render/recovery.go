package render

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgimageai/pgimageai/bridge"
)

// RecoveryText says what RecoverSlot found and did, one line per step.
func RecoveryText(rec bridge.Recovery) string {
	var b bytes.Buffer
	name := rec.Old.Name
	switch {
	case !rec.Found:
		fmt.Fprintf(&b, "slot %s did not exist\n", name)
	case rec.Problem != nil:
		fmt.Fprintf(&b, "slot %s could not stream (wal_status %s%s)\n", name, rec.Old.WALStatus, invalidation(rec))
	default:
		fmt.Fprintf(&b, "slot %s could stream (wal_status %s); recovered because of --force\n", name, rec.Old.WALStatus)
	}
	if rec.Found {
		fmt.Fprintf(&b, "dropped slot %s and re-created it at %s\n", name, rec.New.ConfirmedFlushLSN)
	} else {
		fmt.Fprintf(&b, "created slot %s at %s\n", name, rec.New.ConfirmedFlushLSN)
	}
	cp := "no checkpoint was stored"
	if rec.Progress.Checkpoint != nil {
		cp = "forgot the checkpoint " + *rec.Progress.Checkpoint
	}
	fmt.Fprintf(&b, "%s, %s and %s\n", cp, plural(rec.Progress.Lanes, "lane checkpoint"), plural(rec.Progress.Backfills, "backfill state"))
	for _, t := range rec.Targets {
		rules := strings.Join(t.Rules, ", ")
		if t.Skipped != "" {
			fmt.Fprintf(&b, "%s (rules %s): nothing deleted: %s\n", t.Table, rules, t.Skipped)
			continue
		}
		fmt.Fprintf(&b, "%s (rules %s): deleted %s whose source row no longer exists\n", t.Table, rules, plural(t.Deleted, "row"))
	}
	if len(rec.Rules) == 0 {
		b.WriteString("no rule is enabled: nothing will backfill\n")
	} else {
		fmt.Fprintf(&b, "every enabled rule (%s) backfills when pgimageai run starts; start it now\n", strings.Join(rec.Rules, ", "))
	}
	return b.String()
}

func invalidation(rec bridge.Recovery) string {
	switch {
	case rec.Old.InvalidationReason != "":
		return ", invalidation_reason " + rec.Old.InvalidationReason
	case rec.Old.Conflicting:
		return ", conflicting with recovery"
	}
	return ""
}

func plural(n int64, what string) string {
	s := strconv.FormatInt(n, 10) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}
