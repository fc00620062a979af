package metrics

import (
	"bytes"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/server"
)

// The Go runtime's and the process's own metrics (go_*, process_*), beside ours.
var (
	goCollector      = collectors.NewGoCollector()
	processCollector = collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
)

// serveMetrics is the metrics location's content handler. The scrape is made on a
// goroutine of its own: it waits for every loop to copy its figures (one of them
// this very loop, once the handler returns), reads BPF maps and /proc, and encodes
// with client_golang; then the response is sent from this loop. The loop waits for
// none of it.
func serveMetrics(r *httpcore.Request) httpcore.Status {
	if m := string(r.Head().Method()); m != "GET" && m != "HEAD" {
		return 405
	}
	if !r.DiscardRequestBody() {
		return 400
	}
	accept, _ := r.Head().Headers.Get("accept")
	sc := &scrape{r: r, loop: r.Worker().Loop(), accept: string(accept)}
	r.SetPending(sc)
	c := &collector{m: monitor()}
	if c.m != nil {
		c.loops = c.m.Loops
	} else {
		// No server attached (a test of the module alone): this loop only.
		c.loops = []server.MonitorLoop{{Loop: r.Worker().Loop(), Worker: r.Worker()}}
	}
	go sc.run(c)
	return httpcore.Done
}

// scrape is one metrics request, its Pending while the goroutine works.
type scrape struct {
	r       *httpcore.Request
	loop    *eventloop.Loop
	accept  string
	aborted bool // the request ended meanwhile (touched on the loop only)
}

// scrapes lets one scrape work at a time: others wait their turn off the loops.
var scrapes = make(chan struct{}, 1)

// run gathers and encodes off the loop, then answers on it.
func (sc *scrape) run(c *collector) {
	scrapes <- struct{}{}
	defer func() { <-scrapes }()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c, goCollector, processCollector)
	families, err := reg.Gather()
	format := expfmt.NegotiateAccept(http.Header{"Accept": []string{sc.accept}}, expfmt.DefaultOpenMetricsAcceptedFormats()...)
	var body bytes.Buffer
	if err == nil {
		enc := expfmt.NewEncoder(&body, format)
		for _, f := range families {
			if err = enc.Encode(f); err != nil {
				break
			}
		}
		if closer, ok := enc.(expfmt.Closer); ok && err == nil {
			err = closer.Close()
		}
	}
	sc.loop.Run(func() { sc.answer(format, body.Bytes(), err) })
}

// answer sends the scrape's result, on the request's loop.
func (sc *scrape) answer(format expfmt.Format, body []byte, err error) {
	if sc.aborted {
		return
	}
	r := sc.r
	r.SetPending(nil)
	if err != nil {
		r.Log().Error("metrics: " + err.Error())
		r.Fail(500)
		return
	}
	h := r.NewHeader()
	h.Status = 200
	h.ContentLength = int64(len(body))
	h.Add(contentType, []byte(format))
	r.SendHeader()
	r.SendBody(body, true)
	r.Finish()
}

var contentType = []byte("Content-Type")

// The Pending interface: the scrape reads no body and needs no backpressure; it
// only has to know when the request is gone.
func (sc *scrape) BodyData([]byte)   {}
func (sc *scrape) BodyRead()         {}
func (sc *scrape) BodyEnd()          {}
func (sc *scrape) ClientBlocked()    {}
func (sc *scrape) ClientWritable()   {}
func (sc *scrape) TunnelData([]byte) {}
func (sc *scrape) ClientGone() bool  { return false }
func (sc *scrape) Abort()            { sc.aborted = true }
