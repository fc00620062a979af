package eventloop

import (
	"math"
	"time"
)

// rateLimit is a connection's SetRateLimit state (nginx's limit_rate), allocated on
// first use so that a connection without one carries a nil pointer only.
type rateLimit struct {
	rate    int64 // bytes per second
	after   int64 // bytes that go out before the rate applies
	sent    int64 // bytes sent since SetRateLimit
	start   int64 // loop clock (ns) at SetRateLimit
	delayed bool  // waiting for the timer: output is not polled
	timer   Timer
}

// minRateWrite is the smallest write a delayed connection waits for (unless less is
// queued), so that a low rate means fewer, larger writes rather than a wake-up per
// few bytes.
const minRateWrite = 4096

// SetRateLimit implements Conn.
func (c *conn) SetRateLimit(rate, after int64) {
	if rate <= 0 {
		if rl := c.rl; rl != nil {
			rl.timer.Stop()
			c.rl = nil
			if rl.delayed && c.state != connClosed {
				c.updateEvents()
				c.armWriteTimeout()
			}
		}
		return
	}
	rl := c.rl
	if rl == nil {
		rl = &rateLimit{}
		c.loop.InitTimer(&rl.timer, c.onRateTimer)
		c.rl = rl
	}
	rl.rate, rl.after, rl.sent, rl.start = rate, max(after, 0), 0, c.loop.now()
}

// allowance is how many bytes may go out now: after, then rate per second with
// nginx's one second in advance (limit_rate * (elapsed + 1) - sent).
func (rl *rateLimit) allowance(now int64) int {
	ms := (now - rl.start) / int64(time.Millisecond)
	allowed := rl.after + rl.rate*(ms+1000)/1000
	return int(min(max(allowed-rl.sent, 0), math.MaxInt32))
}

// delay stops polling for output until the rate allows the next write: at least
// minRateWrite bytes, or what is queued if less. The write timeout does not run
// meanwhile, as nginx's send_timeout does not for a delayed write.
func (c *conn) delay(allowance int) {
	rl := c.rl
	need := int64(min(c.q.size, minRateWrite) - allowance)
	wait := time.Duration(max(need, 1)) * time.Second / time.Duration(rl.rate)
	rl.delayed = true
	rl.timer.Reset(max(wait, time.Millisecond))
	c.wtimer.Stop()
	c.updateEvents()
}

// onRateTimer: the rate allows more output.
func (c *conn) onRateTimer(*Timer) {
	defer c.loop.recoverConn(c)
	rl := c.rl
	if rl == nil || c.state == connClosed {
		return
	}
	rl.delayed = false
	if c.q.size == 0 {
		c.updateEvents()
		return
	}
	c.armWriteTimeout()
	if err := c.flush(); err != nil {
		c.closeNow(err)
	}
}

// armWriteTimeout starts the write timeout if output waits and none runs.
func (c *conn) armWriteTimeout() {
	if c.wtimeout > 0 && c.q.size > 0 && !c.wtimer.Pending() && (c.rl == nil || !c.rl.delayed) {
		c.wtimer.Reset(c.wtimeout)
	}
}

// sendLimited is send under the rate limit: what the allowance lets out, then a
// delay if output is left that the allowance does not cover.
func (c *conn) sendLimited() error {
	rl, l := c.rl, c.loop
	if c.q.size == 0 {
		return nil
	}
	allowance := rl.allowance(l.now())
	if allowance == 0 {
		c.delay(0)
		return nil
	}
	before := c.q.size
	err := c.sendUpTo(allowance)
	rl.sent += int64(before - c.q.size)
	if err == nil && c.q.size > 0 {
		if left := rl.allowance(l.now()); left < min(c.q.size, minRateWrite) {
			c.delay(left)
		}
	}
	return err
}
