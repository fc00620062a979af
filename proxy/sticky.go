package proxy

import (
	"bytes"
	"time"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/upstream"
)

var setCookieName = []byte("Set-Cookie")

// stickyPeer is the server the request's sticky cookie names in the exchange's
// group (upstream's sticky cookie), nil when it names none.
func (ex *exchange) stickyPeer(st *upstream.Sticky) *upstream.Peer {
	h := &ex.r.Head().Headers
	for i := h.Index("cookie", 0); i >= 0; i = h.Index("cookie", i+1) {
		if p := ex.g.PeerByRoute(cookieValue(h.Value(i), st.Cookie)); p != nil {
			return p
		}
	}
	return nil
}

// cookieValue finds a cookie in a Cookie header ("a=1; b=2").
func cookieValue(h []byte, name string) []byte {
	for len(h) > 0 {
		item := h
		if i := bytes.IndexByte(h, ';'); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		item = bytes.TrimSpace(item)
		if i := bytes.IndexByte(item, '='); i >= 0 && string(item[:i]) == name {
			return item[i+1:]
		}
	}
	return nil
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
