package healthcheck

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/upstream"
)

// maxBody is how much of a response body match's body tests see (NGINX Plus
// examines the first 256k).
const maxBody = 256 << 10

// maxHead bounds a probe's response head.
const maxHead = 64 << 10

// snapHealth is one snapshot's health checks: claimed by the first loop that
// starts with it or reloads to it, which then runs every probe.
type snapHealth struct {
	checks  []*Check
	claimed atomic.Bool
}

// stateKey names a server across snapshots, for the verdicts a reload keeps.
type stateKey struct {
	group string
	peer  upstream.PeerKey
}

// verdicts are the servers' last health states, for the next snapshot; the loop
// that probes replaces the map when one changes (copy on write, changes are rare).
var verdicts atomic.Pointer[map[stateKey]bool]

func initModule(s *httpcore.Setup) error {
	m := s.Config.MainConf(self).(*mainConf)
	if len(m.checks) == 0 {
		return nil
	}
	prev := map[stateKey]bool{}
	if p := verdicts.Load(); p != nil {
		prev = *p
	}
	sh := &snapHealth{checks: m.checks}
	for _, hc := range m.checks {
		for _, p := range append(append([]*upstream.Peer(nil), hc.group.Peers...), hc.group.Backup...) {
			h := p.Health()
			start := !hc.Mandatory // healthy until a check fails
			if was, ok := prev[stateKey{hc.group.Name, p.Key()}]; ok && (!hc.Mandatory || hc.Persistent) {
				start = was
			}
			if h.Checked() && !h.Healthy() {
				start = false // another check of the group already keeps it out
			}
			h.Start(!start)
		}
	}
	s.SetState(key, sh)
	return nil
}

// loopState runs the probes of the snapshots its loop claimed.
type loopState struct {
	w       *httpcore.Worker
	runners []*runner
}

func newLoop(w *httpcore.Worker) httpcore.LoopState { return &loopState{w: w} }

// Start claims the first snapshot's checks if no loop has.
func (st *loopState) Start(snap *httpcore.Snapshot) { st.Reload(snap) }

// Reload stops the probes of older snapshots and claims the new one's checks if
// no loop has.
func (st *loopState) Reload(snap *httpcore.Snapshot) {
	sh, _ := snap.State(key).(*snapHealth)
	keep := st.runners[:0]
	for _, r := range st.runners {
		if r.sh == sh {
			keep = append(keep, r)
			continue
		}
		r.stop()
	}
	st.runners = keep
	if sh == nil || !sh.claimed.CompareAndSwap(false, true) {
		return
	}
	current.Store(sh)
	r := &runner{sh: sh, loop: st.w.Loop(), log: st.w.Log(), bad: map[*upstream.Peer]int{}}
	seed := uint64(time.Now().UnixNano()) | 1
	for _, hc := range sh.checks {
		for _, p := range append(append([]*upstream.Peer(nil), hc.group.Peers...), hc.group.Backup...) {
			pr := &probe{r: r, hc: hc, peer: p, healthy: p.Health().Healthy(), rng: seed}
			seed = seed*6364136223846793005 + 1442695040888963407
			if !pr.healthy {
				r.bad[p]++
			}
			r.loop.InitTimer(&pr.timer, pr.onTimer)
			r.probes = append(r.probes, pr)
		}
	}
	for _, pr := range r.probes {
		pr.timer.Reset(0) // the first checks at once, as NGINX Plus at start
	}
	st.runners = append(st.runners, r)
}

// runner is one snapshot's probes on the loop that claimed them.
type runner struct {
	sh      *snapHealth
	loop    *eventloop.Loop
	log     *slog.Logger
	probes  []*probe
	bad     map[*upstream.Peer]int // checks that fail the peer now
	stopped bool
}

func (r *runner) stop() {
	r.stopped = true
	for _, pr := range r.probes {
		pr.timer.Stop()
		if pr.conn != nil {
			pr.done = true
			_ = pr.conn.Close()
		}
	}
}

// probe is one health_check's probing of one server.
type probe struct {
	r     *runner
	hc    *Check
	peer  *upstream.Peer
	timer eventloop.Timer
	rng   uint64

	conn   eventloop.Conn // the check in flight; nil between checks
	opened bool
	done   bool // the check's verdict is given; the close that follows is ours
	buf    []byte
	resp   http1.Response

	healthy       bool
	passes, fails int // consecutive
}

func (pr *probe) onTimer(*eventloop.Timer) {
	if pr.r.stopped || pr.conn != nil {
		return
	}
	if pr.r.loop.Draining() {
		return // a stopping loop sends no more probes
	}
	addr := pr.peer.Addr
	if pr.hc.Port != 0 && pr.peer.Unix == "" {
		addr = netip.AddrPortFrom(addr.Addr(), pr.hc.Port)
	}
	pr.opened, pr.done, pr.buf = false, false, pr.buf[:0]
	c, err := pr.r.loop.DialWith(addr, eventloop.DialOptions{Unix: pr.peer.Unix, Timeout: pr.hc.connectTimeout}, pr, nil)
	if err != nil {
		pr.verdict(false, "connecting to upstream", "connect() failed ("+err.Error()+")")
		pr.next()
		return
	}
	pr.conn = c
}

// next arms the timer for the next check: interval plus up to jitter.
func (pr *probe) next() {
	d := pr.hc.Interval
	if j := pr.hc.Jitter; j > 0 {
		pr.rng ^= pr.rng << 13
		pr.rng ^= pr.rng >> 7
		pr.rng ^= pr.rng << 17
		d += time.Duration(pr.rng % uint64(j))
	}
	if !pr.r.stopped {
		pr.timer.Reset(d)
	}
}

func (pr *probe) OnOpen(c eventloop.Conn) {
	pr.opened = true
	host := pr.hc.group.Name
	req := "GET " + pr.hc.URI + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
	_, _ = c.Write([]byte(req))
	c.SetTimeout(pr.hc.readTimeout)
}

func (pr *probe) OnData(c eventloop.Conn, data []byte) {
	if pr.done {
		return
	}
	c.SetTimeout(pr.hc.readTimeout)
	room := maxHead + maxBody - len(pr.buf)
	if len(data) > room {
		data = data[:room]
	}
	pr.buf = append(pr.buf, data...)
	complete := len(pr.buf) >= maxHead+maxBody
	if !complete {
		pr.resp.Reset()
		pr.resp.Limits = http1.Limits{MaxLineSize: maxHead, MaxHeadSize: maxHead}
		n, err := pr.resp.Parse(pr.buf)
		switch {
		case errors.Is(err, http1.ErrNeedMore):
		case err != nil:
			complete = true
		case pr.resp.Framing() == http1.BodyNone:
			complete = true
		case pr.resp.Framing() == http1.BodyContentLength:
			complete = int64(len(pr.buf)-n) >= min(pr.resp.ContentLength(), maxBody)
		}
	}
	if complete {
		pr.finish()
	}
}

func (pr *probe) OnWriteBlocked(eventloop.Conn) {}
func (pr *probe) OnWritable(eventloop.Conn)     {}

func (pr *probe) OnTimeout(c eventloop.Conn) {
	if !pr.done {
		pr.done = true
		pr.verdict(false, "reading response header from upstream", "upstream timed out")
	}
	_ = c.Close()
}

func (pr *probe) OnClose(_ eventloop.Conn, err error) {
	pr.conn = nil
	if pr.r.stopped {
		return
	}
	if !pr.done {
		pr.done = true
		switch {
		case !pr.opened:
			pr.verdict(false, "connecting to upstream", "connect() failed ("+errText(err)+")")
		case err == nil || errors.Is(err, io.EOF):
			pr.evaluate() // a response that ends with the connection
		default:
			pr.verdict(false, "reading response header from upstream", "recv() failed ("+errText(err)+")")
		}
	}
	pr.next()
}

func errText(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// finish gives the verdict of a complete response and closes the connection.
func (pr *probe) finish() {
	pr.done = true
	pr.evaluate()
	if pr.conn != nil {
		_ = pr.conn.Close()
	}
}

// evaluate checks the response read so far against the check's match.
func (pr *probe) evaluate() {
	pr.resp.Reset()
	pr.resp.Limits = http1.Limits{MaxLineSize: maxHead, MaxHeadSize: maxHead}
	n, err := pr.resp.Parse(pr.buf)
	if err != nil {
		pr.verdict(false, "reading response header from upstream", "upstream sent invalid header")
		return
	}
	body := pr.buf[n:]
	if pr.resp.Chunked() {
		body = dechunk(body)
	}
	if len(body) > maxBody {
		body = body[:maxBody]
	}
	ok, phase := true, ""
	if pr.hc.match == nil {
		code := pr.resp.StatusCode()
		ok, phase = code >= 200 && code < 400, "checking status code"
	} else {
		ok, phase = pr.hc.match.test(&pr.resp, body)
	}
	if ok {
		phase = "checking status code"
	}
	pr.verdict(ok, phase, "")
}

// dechunk is what the chunks of a chunked body (as far as it was read) carry.
func dechunk(p []byte) []byte {
	var d http1.ChunkedDecoder
	var out []byte
	for len(p) > 0 {
		n, data, err := d.Decode(p)
		out = append(out, data...)
		if err != nil || n == 0 || d.Done() {
			break
		}
		p = p[n:]
	}
	return out
}

// test runs the match block's tests; the phase of the first that fails.
func (mt *Match) test(r *http1.Response, body []byte) (bool, string) {
	code := r.StatusCode()
	for _, t := range mt.status {
		in := false
		for _, rg := range t.ranges {
			if code >= rg[0] && code <= rg[1] {
				in = true
			}
		}
		if in == t.not {
			return false, "checking status code"
		}
	}
	for _, t := range mt.headers {
		if !t.pass(r) {
			return false, "checking header \"" + t.name + "\""
		}
	}
	for _, t := range mt.bodies {
		if t.re.Match(body) == t.not {
			return false, "checking body"
		}
	}
	return true, ""
}

func (t *headerTest) pass(r *http1.Response) bool {
	found := false
	for i := 0; i < r.Len(); i++ {
		if !http1.EqualFold(r.Name(i), t.name) {
			continue
		}
		found = true
		v := r.Value(i)
		switch t.op {
		case "=":
			if string(v) == t.value {
				return true
			}
		case "!=":
			if string(v) != t.value {
				return true
			}
		case "~":
			if t.re.Match(v) {
				return true
			}
		case "!~":
			if !t.re.Match(v) {
				return true
			}
		}
	}
	switch t.op {
	case "":
		return found
	case "!":
		return !found
	}
	return false
}

// verdict counts a check's outcome and changes the server's state after fails
// failures or passes passes in a row, logging the change as NGINX Plus does.
func (pr *probe) verdict(ok bool, phase, reason string) {
	now := time.Now()
	r := pr.r
	where := fmt.Sprintf("health check %q of peer %s in upstream %q", pr.hc.MatchName, pr.peer, pr.hc.group.Name)
	if ok {
		pr.fails = 0
		pr.passes++
		if pr.healthy || pr.passes < pr.hc.Passes {
			return
		}
		pr.healthy = true
		r.bad[pr.peer]--
		r.log.Log(nil, errorlog.LevelNotice, "peer is healthy while "+phase+", "+where)
	} else {
		pr.passes = 0
		pr.fails++
		if reason != "" {
			r.log.Log(nil, errorlog.LevelInfo, reason+" while "+phase+", "+where)
		}
		if !pr.healthy || pr.fails < pr.hc.Fails {
			return
		}
		pr.healthy = false
		r.bad[pr.peer]++
		msg := "peer is unhealthy while " + phase + ", " + where
		if reason != "" {
			msg = reason + " while " + phase + ", " + where + "; peer is unhealthy"
		}
		r.log.Log(nil, errorlog.LevelWarn, msg)
	}
	up := r.bad[pr.peer] == 0
	pr.peer.Health().Set(up, now)
	publish(stateKey{pr.hc.group.Name, pr.peer.Key()}, up)
}

// publish records a server's state for the snapshot a reload makes.
func publish(k stateKey, up bool) {
	for {
		old := verdicts.Load()
		m := map[stateKey]bool{}
		if old != nil {
			for k, v := range *old {
				m[k] = v
			}
		}
		m[k] = up
		if verdicts.CompareAndSwap(old, &m) {
			return
		}
	}
}

// current is the snapshot whose checks a loop runs now, for States.
var current atomic.Pointer[snapHealth]

// PeerState is one server's health as the checks see it.
type PeerState struct {
	Group, Peer string
	Healthy     bool
}

// States are the health states of the servers the current configuration's
// health checks probe (for the metrics); safe from any goroutine.
func States() []PeerState {
	sh := current.Load()
	if sh == nil {
		return nil
	}
	var out []PeerState
	seen := map[*upstream.Peer]bool{}
	for _, hc := range sh.checks {
		for _, p := range append(append([]*upstream.Peer(nil), hc.group.Peers...), hc.group.Backup...) {
			if !seen[p] {
				seen[p] = true
				out = append(out, PeerState{Group: hc.group.Name, Peer: p.String(), Healthy: p.Health().Healthy()})
			}
		}
	}
	return out
}
