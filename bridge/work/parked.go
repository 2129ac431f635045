package work

import "errors"

// Parked is the failure of a call that was not made, or given up, because
// its model is down (its circuit is open, internal/circuit): not a failure
// of the row. Its item parks the row (pgimageai.parked) rather than
// writing a result or an errors row; the row is sent again once the model
// answers.
type Parked struct {
	Model string // models.name
	Cause string // what the model's last failed request said
	Err   error  // the failed request's error, when one was made
}

func (e *Parked) Error() string {
	s := "model " + e.Model + " is down; the row is parked"
	if e.Cause != "" {
		s += " (" + e.Cause + ")"
	}
	return s
}

func (e *Parked) Unwrap() error { return e.Err }

// ParkedBy returns the *Parked that err is or wraps, or nil.
func ParkedBy(err error) *Parked {
	var p *Parked
	if errors.As(err, &p) {
		return p
	}
	return nil
}
