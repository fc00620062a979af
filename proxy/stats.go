package proxy

import (
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/stats"
	"github.com/numaproxy/numaproxy/upstream"
)

// PeerStats are one upstream server's figures in one loop, kept while a module
// reports figures (httpcore.Snapshot.StatsEnabled). The loop writes them without
// atomics; a reader copies them on the loop (Stats).
type PeerStats struct {
	Group string // the upstream block's name, or host:port of an implicit group
	Peer  string // $upstream_addr's form: host:port or unix:/path

	Tries           uint64          // requests sent (or being sent) to the server, retries included
	Reused          uint64          // of Tries, those on a cached keep-alive connection
	ConnectFailures uint64          // connections that could not be made (refused, timed out)
	Failures        uint64          // tries that failed: proxy_next_upstream's error, timeout, invalid_header, a listed status
	Retries         uint64          // requests passed to the next server after a failure here
	Responses       [6]uint64       // response heads by status class (stats.Class)
	ResponseTime    stats.Histogram // from the try's start to the response head ($upstream_response_time)
}

type peerStatsKey struct {
	group string
	peer  upstream.PeerKey
}

// peerStats is this loop's figures of p in g, nil while no module reports figures.
// Entries are kept by name and address, so they carry over a reload.
func (st *loopState) peerStats(r *httpcore.Request, g *upstream.Group, p *upstream.Peer) *PeerStats {
	if !r.Snapshot().StatsEnabled() {
		return nil
	}
	k := peerStatsKey{g.Name, p.Key()}
	ps := st.stats[k]
	if ps == nil {
		ps = &PeerStats{Group: g.Name, Peer: p.String()}
		st.stats[k] = ps
		st.statsList = append(st.statsList, ps)
	}
	return ps
}

// Stats appends a copy of the loop's upstream figures to dst. Call it on the
// worker's loop (a task), where the figures are written.
func Stats(w *httpcore.Worker, dst []PeerStats) []PeerStats {
	st, ok := w.State(key).(*loopState)
	if !ok {
		return dst
	}
	for _, ps := range st.statsList {
		dst = append(dst, *ps)
	}
	return dst
}
