package proxy

import (
	"strconv"
	"time"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/upstream"
)

// upState is one try of a request upstream, nginx's ngx_http_upstream_state_t. The
// $upstream_* variables list a request's tries with ", " between them and " : "
// between the exchanges of internal redirects (a zero upState, without peer, marks
// where a new one began). They outlive the exchange, for the log phase.
type upState struct {
	peer                      *upstream.Peer
	status                    int
	connect, header, response time.Duration // -1: not reached
	received, sent, length    int64
	headLen                   int64 // the response head's bytes among received
	passed                    bool  // the response went on to the client (not retried, intercepted or redirected)
}

// beginTry starts the state of a try to p; the try before it ends.
func (ex *exchange) beginTry(p *upstream.Peer, now time.Duration) {
	ex.endTry(now)
	ex.states = append(ex.states, upState{peer: p, connect: -1, header: -1, response: -1})
}

// try is the current try's state.
func (ex *exchange) try() *upState {
	if n := len(ex.states); n > 0 {
		return &ex.states[n-1]
	}
	return &ex.noState
}

// endTry sets the response time of the current try if it is still running (nginx
// sets it when the next try starts and when the request is finalized).
func (ex *exchange) endTry(now time.Duration) {
	st := ex.try()
	if st.peer == nil || st.response >= 0 {
		return
	}
	st.response = now - ex.tryStart
	if st.connect < 0 {
		st.sent = 0 // queued for a connection that never came up: nginx counts what went out
	}
	if st.passed {
		// nginx counts the body it read for the client: none of a response it
		// retried or replaced (error_page, X-Accel-Redirect).
		st.length = max(st.received-st.headLen, 0)
	}
}

// connectedTry: the connection of the current try is up (or was reused).
func (ex *exchange) connectedTry() {
	if st := ex.try(); st.connect < 0 {
		st.connect = ex.clock() - ex.tryStart
	}
}

// statesOf is the request's upstream tries, nil when it went to none.
func statesOf(r *httpcore.Request) []upState {
	ex, _ := r.Ctx(key).(*exchange)
	if ex == nil || ex.seq != r.Seq() {
		return nil
	}
	return ex.states
}

// appendStates appends one value per try with nginx's separators; each appends its
// try's value.
func appendStates(dst []byte, r *httpcore.Request, each func(dst []byte, st *upState) []byte) []byte {
	states := statesOf(r)
	for i := 0; i < len(states); i++ {
		if st := &states[i]; st.peer != nil {
			dst = each(dst, st)
		}
		if i+1 == len(states) {
			break
		}
		if states[i+1].peer != nil {
			dst = append(dst, ", "...)
		} else {
			dst = append(dst, " : "...)
			i++
		}
	}
	return dst
}

func appendMsec(dst []byte, d time.Duration) []byte {
	if d < 0 {
		return append(dst, '-')
	}
	return httpcore.AppendSeconds(dst, d)
}

// stateVariables are the $upstream_ variables of the tries.
var stateVariables = []httpcore.Variable{
	{Name: "upstream_addr", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return st.peer.AppendAddr(dst) })
	}},
	{Name: "upstream_status", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte {
			if st.status == 0 {
				return append(dst, '-')
			}
			return strconv.AppendInt(dst, int64(st.status), 10)
		})
	}},
	{Name: "upstream_connect_time", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return appendMsec(dst, st.connect) })
	}},
	{Name: "upstream_header_time", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return appendMsec(dst, st.header) })
	}},
	{Name: "upstream_response_time", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte {
			if st.response < 0 && st.header >= 0 {
				return appendMsec(dst, st.header) // the response is still coming (add_header)
			}
			return appendMsec(dst, st.response)
		})
	}},
	{Name: "upstream_response_length", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return strconv.AppendInt(dst, st.length, 10) })
	}},
	{Name: "upstream_bytes_received", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return strconv.AppendInt(dst, st.received, 10) })
	}},
	{Name: "upstream_bytes_sent", Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		return appendStates(dst, r, func(dst []byte, st *upState) []byte { return strconv.AppendInt(dst, st.sent, 10) })
	}},
}
