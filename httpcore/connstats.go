package httpcore

import "sync/atomic"

// The client connections of a worker, by what they are doing, as nginx's stub
// status counts them: waiting (idle: before the first request byte and between
// keep-alive requests), reading (a request head is arriving) and writing (a request
// is being served, its body read, its response sent, lingering included). Every
// client connection is in exactly one of them from OnOpen to OnClose.
//
// The three gauges are packed into one word so that a transition is one atomic add
// on a line only this worker's loop writes: no atomic is shared between loops, and
// any goroutine reads a consistent triple with one load (Worker.ConnStats). Each
// field holds up to 2^21-1 connections, beyond any loop's worker_connections. A
// keep-alive request costs three uncontended atomic adds (BenchmarkConnStats),
// and only while a module reports figures (Setup.EnableStats): nginx built with
// its stub status module pays as many on counters all its workers share.
type connStat uint8

const (
	statNone connStat = iota // not counted (closed)
	statWaiting
	statReading
	statWriting
)

const statBits = 21

// statUnit is 1 in the field of each state.
var statUnit = [...]uint64{statNone: 0, statWaiting: 1, statReading: 1 << statBits, statWriting: 1 << (2 * statBits)}

// workerStats are a worker's counters: written on its loop only.
type workerStats struct {
	states   atomic.Uint64 // the packed gauges
	accepts  atomic.Uint64 // client connections taken (nginx's accepts and handled)
	requests atomic.Uint64 // requests whose first byte arrived (nginx's requests)
	upgraded atomic.Int64  // connections turned into tunnels (Request.Tunnel), also counted as writing
}

// ConnStats are a worker's client connection figures, nginx's stub_status ones.
type ConnStats struct {
	Accepts  uint64 // client connections taken since the worker started
	Requests uint64 // requests started
	Waiting  int64  // idle connections
	Reading  int64  // connections reading a request head
	Writing  int64  // connections serving a request
	Upgraded int64  // of Writing, the connections turned into tunnels (an Upgrade answered 101)
}

// Active is the open client connections.
func (s ConnStats) Active() int64 { return s.Waiting + s.Reading + s.Writing }

// Add sums s and o.
func (s ConnStats) Add(o ConnStats) ConnStats {
	return ConnStats{Accepts: s.Accepts + o.Accepts, Requests: s.Requests + o.Requests,
		Waiting: s.Waiting + o.Waiting, Reading: s.Reading + o.Reading, Writing: s.Writing + o.Writing,
		Upgraded: s.Upgraded + o.Upgraded}
}

// ConnStats reads the worker's connection figures; safe from any goroutine. The
// gauges are one consistent reading; the two counters may be a request apart from
// them.
func (w *Worker) ConnStats() ConnStats {
	const mask = 1<<statBits - 1
	v := w.stats.states.Load()
	return ConnStats{
		Accepts: w.stats.accepts.Load(), Requests: w.stats.requests.Load(), Upgraded: w.stats.upgraded.Load(),
		Waiting: int64(v & mask), Reading: int64(v >> statBits & mask), Writing: int64(v >> (2 * statBits) & mask),
	}
}

// setStat records that the connection is now doing s. While the worker's snapshot
// asks for figures (Snapshot.StatsEnabled) it moves the connection to s in the
// gauges with one atomic add (the old state's field is at least 1: no borrow) and
// counts a request at its first byte (a head that arrives whole goes from waiting
// to writing at once); otherwise the connection leaves the gauges, so that each
// one always takes out what it put in, across reloads that switch counting.
func (c *conn) setStat(s connStat) {
	if c.lstat == s {
		return
	}
	on := c.w.snap.stats
	if on && c.lstat == statWaiting && s != statNone {
		c.w.stats.requests.Add(1)
	}
	c.lstat = s
	if !on {
		s = statNone
	}
	if c.stat != s {
		c.w.stats.states.Add(statUnit[s] - statUnit[c.stat])
		c.stat = s
	}
	if c.upgraded && s != statWriting {
		c.upgraded = false
		c.w.stats.upgraded.Add(-1)
	}
}

// setUpgraded counts the connection as a tunnel until it leaves the writing state
// (its close), while it is counted at all.
func (c *conn) setUpgraded() {
	if c.stat == statWriting && !c.upgraded {
		c.upgraded = true
		c.w.stats.upgraded.Add(1)
	}
}

// CountedWhileLogged is 1 in the gauge (reading or writing) that counts the
// request's connection once its log phase began, else 0: nginx's $connections_reading
// and _writing in a log line no longer count it (ngx_http_free_request takes the
// request out of them before it logs), though $connections_active does.
func (r *Request) CountedWhileLogged() (reading, writing int64) {
	if !r.logged {
		return 0, 0
	}
	switch r.c.stat {
	case statReading:
		return 1, 0
	case statWriting:
		return 0, 1
	}
	return 0, 0
}
