// Package stats holds the plain counters modules keep per loop for monitoring: a
// loop writes its own without atomics or locks, and a reader copies them with a
// task on that loop (eventloop.Loop.Run), so a copy is never torn.
package stats

import "time"

// Bounds are the upper bounds of the duration histograms' buckets, in seconds:
// Prometheus's default buckets, which dashboards expect.
var Bounds = [...]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

var boundsNs = func() (b [len(Bounds)]int64) {
	for i, s := range Bounds {
		b[i] = int64(s * 1e9)
	}
	return b
}()

// Histogram counts durations into Bounds' buckets: Counts[i] the observations in
// (Bounds[i-1], Bounds[i]], the last slot those above every bound.
type Histogram struct {
	Counts [len(Bounds) + 1]uint64
	SumNs  int64
}

// Observe counts d.
func (h *Histogram) Observe(d time.Duration) {
	ns := int64(d)
	i := 0
	for i < len(boundsNs) && ns > boundsNs[i] {
		i++
	}
	h.Counts[i]++
	h.SumNs += ns
}

// Add adds o's observations to h.
func (h *Histogram) Add(o *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.SumNs += o.SumNs
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Cumulative is the count of observations at or below each bound, Prometheus's
// buckets.
func (h *Histogram) Cumulative() map[float64]uint64 {
	m := make(map[float64]uint64, len(Bounds))
	var n uint64
	for i, b := range Bounds {
		n += h.Counts[i]
		m[b] = n
	}
	return m
}

// Class is the index of a status in a by-class array: 0 for 1xx to 4 for 5xx, 5
// for none (the connection ended before a response).
func Class(status int) int {
	if status < 100 || status > 599 {
		return 5
	}
	return status/100 - 1
}

// ClassNames are the label values of Class's indexes.
var ClassNames = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx", "none"}
