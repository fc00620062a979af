package resolver

import (
	"errors"
	"strconv"
)

// Answer codes and the timeout, as nginx numbers them in its messages.
const (
	FormErr  = 1   // Format error
	ServFail = 2   // Server failure
	NXDomain = 3   // Host not found
	NotImp   = 4   // Unimplemented
	Refused  = 5   // Operation refused
	TimedOut = 110 // Operation timed out (ETIMEDOUT): resolver_timeout passed
	Canceled = 125 // Operation canceled (ECANCELED): the Resolver was closed
)

// Error is a failed lookup. Its text is nginx's error log line:
// "example.com could not be resolved (3: Host not found)".
type Error struct {
	Name string // the name looked up (not a CNAME target on the way)
	Code int    // NXDomain, ServFail, TimedOut...
}

func (e *Error) Error() string {
	return e.Name + " could not be resolved (" + strconv.Itoa(e.Code) + ": " + CodeText(e.Code) + ")"
}

// Timeout reports whether the lookup ran out of time.
func (e *Error) Timeout() bool { return e.Code == TimedOut }

// CodeText is nginx's ngx_resolver_strerror.
func CodeText(code int) string {
	switch code {
	case FormErr:
		return "Format error"
	case ServFail:
		return "Server failure"
	case NXDomain:
		return "Host not found"
	case NotImp:
		return "Unimplemented"
	case Refused:
		return "Operation refused"
	case TimedOut:
		return "Operation timed out"
	case Canceled:
		return "Operation canceled"
	}
	return "Unknown error"
}

// ErrNoServers is New's error for a Config without name servers.
var ErrNoServers = errors.New("resolver: no name servers defined")
