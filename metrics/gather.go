package metrics

import (
	"slices"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/proxy"
	"github.com/numaproxy/numaproxy/server"
)

// loopFigures are one loop's figures at a scrape, copied on the loop.
type loopFigures struct {
	Index, CPU, Domain int
	HTTP               httpFigures
	Zones              []zoneFigures
	Upstreams          []proxy.PeerStats
	RxCPU              []uint64
	RxUnknown          uint64
	Conns              httpcore.ConnStats
	Loop               eventloop.Stats
	TLS                tlsFigures
}

type zoneFigures struct {
	Name string
	httpFigures
}

type tlsFigures struct {
	KTLS, Userspace, Resumed, Failures, Timeouts, KTLSFallbacks uint64
}

// gatherTimeout bounds the wait for the loops: one that does not run its task in
// time (it is stopping, or stuck in a long callback) is left out of the scrape.
var gatherTimeout = 2 * time.Second

// gather copies every loop's figures, each with a task on its own loop so that it
// reads what only that loop writes, between its events. It runs off the loops (the
// scrape's goroutine) and waits for them; loops that exited or do not answer in
// time are left out.
func gather(loops []server.MonitorLoop) []*loopFigures {
	ch := make(chan *loopFigures, len(loops))
	asked := 0
	for _, ml := range loops {
		ml := ml
		err := ml.Loop.Run(func() { ch <- copyFigures(ml) })
		if err == nil {
			asked++
		}
	}
	out := make([]*loopFigures, 0, asked)
	timeout := time.NewTimer(gatherTimeout)
	defer timeout.Stop()
	for len(out) < asked {
		select {
		case f := <-ch:
			out = append(out, f)
		case <-timeout.C:
			asked = len(out)
		}
	}
	slices.SortFunc(out, func(a, b *loopFigures) int { return a.Index - b.Index })
	return out
}

// copyFigures runs on ml's loop.
func copyFigures(ml server.MonitorLoop) *loopFigures {
	f := &loopFigures{Index: ml.Index, CPU: ml.CPU, Domain: ml.Domain,
		Conns: ml.Worker.ConnStats(), Loop: ml.Loop.Stats()}
	if st, ok := ml.Worker.State(key).(*loopState); ok {
		f.HTTP = st.http
		for id, z := range st.zones {
			if z != nil {
				f.Zones = append(f.Zones, zoneFigures{Name: zoneName(id), httpFigures: *z})
			}
		}
		f.RxCPU, f.RxUnknown = slices.Clone(st.rxCPU), st.rxUnknown
	}
	f.Upstreams = proxy.Stats(ml.Worker, nil)
	if t := ml.TLS; t != nil {
		f.TLS = tlsFigures{KTLS: t.KTLS.Load(), Userspace: t.Userspace.Load(), Resumed: t.Resumed.Load(),
			Failures: t.Failures.Load(), Timeouts: t.Timeouts.Load(), KTLSFallbacks: t.KTLSFallbacks.Load()}
	}
	return f
}
