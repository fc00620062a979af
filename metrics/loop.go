package metrics

import (
	"runtime"
	"time"

	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/stats"
)

// httpFigures are the requests of one loop, or of one zone in one loop.
type httpFigures struct {
	Requests [len(stats.ClassNames)]uint64 // by status class (stats.Class)
	BytesIn  uint64                        // request heads and bodies
	BytesOut uint64                        // response heads and bodies
	Duration stats.Histogram               // from the head read to the log phase ($request_time)
}

func (f *httpFigures) count(status int, in, out int64, d time.Duration) {
	f.Requests[stats.Class(status)]++
	f.BytesIn += uint64(in)
	f.BytesOut += uint64(out)
	f.Duration.Observe(d)
}

// loopState is the module's figures in one loop. Only the loop writes them, with
// plain stores; a scrape copies them with a task on the loop (gather.go), so no copy
// is ever torn and no counter needs an atomic or a lock.
type loopState struct {
	w     *httpcore.Worker
	http  httpFigures
	zones []*httpFigures // by zone id; nil for zones this loop has not counted
	// rxCPU counts the connections sampled per CPU that processed their packets
	// (SO_INCOMING_CPU at their first request); the scrape maps CPUs to domains.
	rxCPU     []uint64
	rxUnknown uint64 // the socket option failed
	text      []byte // the status page, built here; reused
}

func newLoop(w *httpcore.Worker) httpcore.LoopState {
	return &loopState{w: w, text: make([]byte, 0, 256), rxCPU: make([]uint64, runtime.NumCPU())}
}

func (*loopState) Reload(*httpcore.Snapshot) {}

// zone is the loop's figures of zone z.
func (st *loopState) zone(z *zone) *httpFigures {
	if z.id >= len(st.zones) {
		st.zones = append(st.zones, make([]*httpFigures, z.id+1-len(st.zones))...) // once per new zone
	}
	f := st.zones[z.id]
	if f == nil {
		f = &httpFigures{}
		st.zones[z.id] = f
	}
	return f
}

// sampleConnection records, at a connection's first request head, where the kernel
// processed its packets. Not later: by the end of the request the socket's incoming
// CPU may be the one that processed the client's acknowledgements of the response
// (on loopback, the CPU that sent it).
func sampleConnection(r *httpcore.Request) httpcore.Status {
	if r.ConnectionRequests() == 1 {
		r.Worker().State(key).(*loopState).sampleIncomingCPU(r)
	}
	return httpcore.Declined
}

// logRequest counts a request that ended: in its loop, and in its server's and its
// location's zones.
func logRequest(r *httpcore.Request) httpcore.Status {
	st := r.Worker().State(key).(*loopState)
	var srvZone, locZone *zone
	if srv := r.Server(); srv != nil {
		srvZone = srv.Conf(self).(*LocConf).Zone
	}
	if loc := r.Location(); loc != nil {
		locZone = loc.Conf(self).(*LocConf).Zone
	}
	st.count(r.Status(), r.BytesReceived(), r.BytesSent(), time.Since(r.Started()), srvZone, locZone)
	return httpcore.OK
}

// count adds one request to the loop's figures and its zones'.
func (st *loopState) count(status int, in, out int64, d time.Duration, srvZone, locZone *zone) {
	st.http.count(status, in, out, d)
	if srvZone != nil {
		st.zone(srvZone).count(status, in, out, d)
	}
	if locZone != nil && (srvZone == nil || locZone.id != srvZone.id) {
		st.zone(locZone).count(status, in, out, d)
	}
}

// sampleIncomingCPU records the CPU that processed the connection's packets: one
// getsockopt per connection.
func (st *loopState) sampleIncomingCPU(r *httpcore.Request) {
	cpu, err := r.IncomingCPU()
	if err != nil || cpu < 0 || cpu > 1<<16 {
		st.rxUnknown++
		return
	}
	if cpu >= len(st.rxCPU) {
		st.rxCPU = append(st.rxCPU, make([]uint64, cpu+1-len(st.rxCPU))...) // once per CPU seen
	}
	st.rxCPU[cpu]++
}
