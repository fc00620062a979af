package eventloop

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by operations on a closed connection.
	ErrClosed = errors.New("eventloop: connection closed")
	// ErrTooManyConns is why a loop at Config.MaxConns stopped accepting.
	ErrTooManyConns = errors.New("eventloop: worker_connections are not enough")
	// ErrLoopClosed is returned when a task is sent to a loop that has exited.
	ErrLoopClosed = errors.New("eventloop: loop closed")
	// ErrStopped is the OnClose error of connections closed by Stop.
	ErrStopped = errors.New("eventloop: loop stopped")
	// ErrDraining is the OnClose error of idle connections closed by Drain.
	ErrDraining = errors.New("eventloop: loop draining")
	// ErrDrainTimeout is the OnClose error of connections still open at the Drain deadline.
	ErrDrainTimeout = errors.New("eventloop: drain deadline reached")
	// ErrWriteTimeout is the OnClose error of a connection whose queued output made
	// no progress within its SetWriteTimeout.
	ErrWriteTimeout = errors.New("eventloop: write timed out")
	// ErrDialTimeout is the OnClose error of an outbound connect that did not finish in time.
	ErrDialTimeout = errors.New("eventloop: connect timed out")
)

// PanicError is the OnClose error of a connection whose handler panicked.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("eventloop: handler panic: %v", e.Value) }
