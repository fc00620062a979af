package httpcore

import "testing"

// TestConnStatsPacked: the gauges move between states in one word without
// borrowing from each other.
func TestConnStatsPacked(t *testing.T) {
	w := &Worker{snap: &Snapshot{stats: true}}
	conns := make([]*conn, 5)
	for i := range conns {
		conns[i] = &conn{w: w}
		conns[i].setStat(statWaiting)
	}
	conns[0].setStat(statReading)
	conns[1].setStat(statReading)
	conns[1].setStat(statWriting)
	conns[2].setStat(statWriting)
	conns[3].setStat(statNone)
	if got, want := w.ConnStats(), (ConnStats{Requests: 3, Waiting: 1, Reading: 1, Writing: 2}); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	for _, c := range conns {
		c.setStat(statNone)
	}
	if got := w.ConnStats(); got != (ConnStats{Requests: 3}) {
		t.Fatalf("stats %+v after every close", got)
	}
	// Counting switched off by a reload: a connection leaves the gauges at its next
	// step; switched on, it joins them at its next step.
	c := &conn{w: w}
	c.setStat(statWaiting)
	w.snap = &Snapshot{}
	c.setStat(statWriting)
	if got := w.ConnStats(); got.Active() != 0 || got.Requests != 3 {
		t.Fatalf("stats %+v with counting off", got)
	}
	w.snap = &Snapshot{stats: true}
	c.setStat(statWaiting)
	if got := w.ConnStats(); got.Waiting != 1 || got.Active() != 1 {
		t.Fatalf("stats %+v with counting on again", got)
	}
}

// BenchmarkConnStats is what the core's connection gauges cost a keep-alive
// request whose head arrives whole: waiting to writing with the request count,
// writing to waiting; uncontended atomic adds on the worker's own line, or none
// while no module reports figures.
func BenchmarkConnStats(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			w := &Worker{snap: &Snapshot{stats: on}}
			c := &conn{w: w}
			c.setStat(statWaiting)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.setStat(statWriting)
				c.setStat(statWaiting)
			}
		})
	}
}
