package proxy

import (
	"time"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/upstream"
)

var setCookieName = []byte("Set-Cookie")

// stickyPeer is the server the request's sticky cookie names in the exchange's
// group (upstream's sticky cookie), nil when it names none.
func (ex *exchange) stickyPeer(st *upstream.Sticky) *upstream.Peer {
	v, _ := httpcore.CookieValue(&ex.r.Head().Headers, st.Cookie)
	return ex.g.PeerByRoute(v)
}

// addStickyCookie names the server that answered in the response, unless the
// request's cookie named it already.
func (ex *exchange) addStickyCookie(h *httpcore.Header) {
	st := ex.g.Sticky
	if st == nil || ex.peer == ex.sticky {
		return
	}
	b := h.Buf()
	from := len(b)
	h.AddBuilt(setCookieName, st.AppendCookie(b, ex.peer, time.Now()), from)
}
