package upstream

import (
	"sync/atomic"
	"time"
)

// Health is a peer's state as active health checks (NGINX Plus's health_check)
// see it. One loop probes the peer and stores it; every loop reads it with an
// atomic load when it picks a peer, so publishing a result takes no lock.
type Health struct {
	checked atomic.Bool  // some health_check probes the peer
	down    atomic.Bool  // unhealthy, or "checking" (mandatory) until its first check passes
	upSince atomic.Int64 // unix nanos of the last recovery (health check or fail_timeout), for slow_start
}

// Health returns the peer's health state.
func (p *Peer) Health() *Health { return &p.health }

// Checked reports whether a health check probes the peer.
func (h *Health) Checked() bool { return h.checked.Load() }

// Healthy reports whether the peer's health checks let it take requests.
func (h *Health) Healthy() bool { return !h.down.Load() }

// Start marks the peer as probed; with mandatory it is "checking" (skipped)
// until its first check passes, else healthy.
func (h *Health) Start(mandatory bool) {
	h.checked.Store(true)
	h.down.Store(mandatory)
}

// Set publishes a check's verdict; a peer coming back starts its slow_start.
func (h *Health) Set(healthy bool, now time.Time) {
	if healthy && h.down.Load() {
		h.upSince.Store(now.UnixNano())
	}
	h.down.Store(!healthy)
}

// weightAt is the peer's weight at now: during slow_start after it came back,
// it grows from 1 to its configured weight (NGINX Plus's slow_start).
func (p *Peer) weightAt(now time.Time) int {
	if p.SlowStart <= 0 {
		return p.Weight
	}
	since := p.health.upSince.Load()
	if since == 0 {
		return p.Weight
	}
	el := now.UnixNano() - since
	if el >= int64(p.SlowStart) || el < 0 {
		return p.Weight
	}
	return max(1, int(int64(p.Weight)*el/int64(p.SlowStart)))
}
