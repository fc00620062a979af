package eventloop

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by operations on a closed connection.
	ErrClosed = errors.New("eventloop: connection closed")
	// ErrLoopClosed is returned when a task is sent to a loop that has exited.
	ErrLoopClosed = errors.New("eventloop: loop closed")
	// ErrStopped is the OnClose error of connections closed by Stop.
	ErrStopped = errors.New("eventloop: loop stopped")
	// ErrDraining is the OnClose error of idle connections closed by Drain.
	ErrDraining = errors.New("eventloop: loop draining")
	// ErrReused is the OnClose error of idle connections closed to make room for
	// new ones when the loop ran out of connections (MaxConns) or fds.
	ErrReused = errors.New("eventloop: idle connection closed to make room")
	// ErrDrainTimeout is the OnClose error of connections still open at the Drain deadline.
	ErrDrainTimeout = errors.New("eventloop: drain deadline reached")
	// ErrWriteTimeout is the OnClose error of a connection whose queued output made
	// no progress within its SetWriteTimeout.
	ErrWriteTimeout = errors.New("eventloop: write timed out")
	// ErrFileTruncated is wrapped by the OnClose error of a connection whose file
	// segment (Conn.WriteFile) ended early: the file shrank after it was queued.
	ErrFileTruncated = errors.New("eventloop: file truncated")
	// ErrDialTimeout is the OnClose error of an outbound connect that did not finish in time.
	ErrDialTimeout = errors.New("eventloop: connect timed out")
)

// PanicError is the OnClose error of a connection whose handler panicked.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("eventloop: handler panic: %v", e.Value) }
