package conf

import (
	"errors"
	"fmt"
)

// Pos is where a token stands: a file and a 1-based line. An empty File means the -g
// command line.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string {
	if p.File == "" {
		return "command line"
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Error is a configuration error tied to the place that caused it. Its text follows
// nginx: `unknown directive "locaton" in /etc/numaproxy/site.conf:4`.
type Error struct {
	Pos Pos
	Msg string
	Err error // the underlying error, if any (an open failure, a regexp error)
}

func (e *Error) Error() string {
	if e.Pos == (Pos{}) {
		return e.Msg
	}
	return e.Msg + " in " + e.Pos.String()
}
func (e *Error) Unwrap() error { return e.Err }

// errorf makes an Error at pos.
func errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// at gives err a position unless it already has one, so a directive's parser can
// return plain errors and still be reported with file:line.
func at(pos Pos, err error) error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	return &Error{Pos: pos, Msg: err.Error(), Err: err}
}
