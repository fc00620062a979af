package proxy

import (
	"net/netip"
	"testing"

	"github.com/numaproxy/numaproxy/upstream"
)

// TestIdleListMemo: the one-entry memo in front of the idle map answers as the map
// does, a list removeList took out included (a stale memo would hand its closed
// list to the next request for that server).
func TestIdleListMemo(t *testing.T) {
	st := &loopState{idle: map[upstream.PeerKey]*idleList{}}
	a := upstream.PeerKey{Addr: netip.MustParseAddrPort("127.0.0.1:8001")}
	b := upstream.PeerKey{Addr: netip.MustParseAddrPort("127.0.0.1:8002")}
	u := upstream.PeerKey{Unix: "/run/app.sock"}
	la, lb, lu := &idleList{st: st}, &idleList{st: st}, &idleList{st: st}
	st.idle[a], st.idle[b], st.idle[u] = la, lb, lu
	for _, step := range []struct {
		k    upstream.PeerKey
		want *idleList
	}{{a, la}, {a, la}, {b, lb}, {a, la}, {u, lu}, {u, lu}, {upstream.PeerKey{Unix: "/run/other.sock"}, nil}, {a, la}} {
		if got := st.idleList(step.k); got != step.want {
			t.Fatalf("idleList(%v) = %p, want %p", step.k, got, step.want)
		}
	}
	st.removeList(a, la)
	if got := st.idleList(a); got != nil {
		t.Fatalf("after removeList: %p", got)
	}
	la2 := &idleList{st: st}
	st.idle[a] = la2
	if got := st.idleList(a); got != la2 {
		t.Fatalf("a new list: %p, want %p", got, la2)
	}
}
