package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/value"
)

// Operators' requests on a running switch (pgimageai.switches.request),
// read and carried out by the bridge: value.SwitchForce and
// value.SwitchAbort as the command line's plain strings.
const (
	// SwitchForce: switch without waiting for the rows whose new result
	// failed; they are left NULL.
	SwitchForce = string(value.SwitchForce)
	// SwitchAbort: drop the shadow column and the side work; the live
	// column keeps its version.
	SwitchAbort = string(value.SwitchAbort)
)

// ErrNoSwitch is returned for a rule without a switch.
var ErrNoSwitch = errors.New("no switch running")

// ErrSwitchAborted is returned for a rule whose switch is aborted already.
var ErrSwitchAborted = errors.New("the switch is aborted")

// SwitchRequested is what RequestSwitch found and did.
type SwitchRequested struct {
	SwitchPlan
	State    string // the switch's state when asked
	Previous string // the request it held before: force, abort or ""
}

// RequestSwitch sets request (SwitchForce or SwitchAbort) on rule's switch,
// replacing a request the bridge has not taken yet, and returns the switch
// with the request it held. A rule without a switch is ErrNoSwitch, an
// aborted switch ErrSwitchAborted; nothing is written then.
func RequestSwitch(ctx context.Context, conn *pgx.Conn, rule, request string) (SwitchRequested, error) {
	if request != SwitchForce && request != SwitchAbort {
		return SwitchRequested{}, fmt.Errorf("switch request %q: must be %s or %s", request, SwitchForce, SwitchAbort)
	}
	var s SwitchRequested
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT s.rule, s.side_rule, s.from_version, s.to_version, coalesce(fv.model_id, ''), coalesce(tv.model_id, ''),
  s.target_table, s.live_column, s.shadow_column, s.state, coalesce(s.request, '')
FROM pgimageai.switches s
LEFT JOIN pgimageai.versions fv ON fv.id = s.from_version
LEFT JOIN pgimageai.versions tv ON tv.id = s.to_version
WHERE s.rule = $1
FOR UPDATE OF s`, rule).Scan(&s.Rule, &s.Side, &s.From, &s.To, &s.FromModelID, &s.ToModelID,
			&s.TargetTable, &s.Live, &s.Shadow, &s.State, &s.Previous)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNoSwitch
		case err != nil:
			return err
		case s.State == string(value.SwitchAborted):
			return ErrSwitchAborted
		}
		_, err = tx.Exec(ctx, `UPDATE pgimageai.switches SET request = $2 WHERE rule = $1`, rule, request)
		return err
	})
	switch {
	case errors.Is(err, ErrNoSwitch), errors.Is(err, ErrSwitchAborted):
		return s, fmt.Errorf("rule %s: %w", rule, err)
	case err != nil:
		return s, fmt.Errorf("request %s of the switch of %s: %w", request, rule, err)
	}
	return s, nil
}
