package eventloop

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"runtime/debug"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type connState uint8

const (
	connConnecting connState = iota // outbound connect in progress
	connOpen
	connClosing // flushing queued output, then closing
	connClosed
)

// conn is a TCP connection owned by one loop; it implements Conn.
//
// An idle keep-alive connection holds one of these: the fields are ordered so
// that the small ones share words and the struct fits the 256-byte size class
// (it was 352, then 320, then 288): the idle list links are fds, the addresses
// are packed.
type conn struct {
	loop   *Loop
	h      Handler
	fd     int
	gen    uint32
	events uint32 // epoll interest currently registered
	state  connState

	paused  bool // PauseRead in effect
	idle    bool // SetIdle(true) in effect: in the loop's idle list
	blocked bool // above the write high watermark, OnWriteBlocked sent
	shutWr  bool // CloseWrite called: no more writes; shutdown(SHUT_WR) once flushed
	// InputReady's state: the last read filled the buffer (inMore), or no read
	// since the connection opened or reading was paused (inUnknown).
	inMore    bool
	inUnknown bool
	// resetOnWTimeout: a write timeout resets rather than closes.
	resetOnWTimeout bool
	sendfile        bool // file segments go out with sendfile(2), else pread into pool buffers
	localLoaded     bool
	released        bool // Release: in the loop's released list, then its free list
	// closeWhy is the OnClose error once a graceful close completes, as an index
	// into closeErrs.
	closeWhy uint8
	// File bytes sent per readiness event at most; 0: no bound. Held as int32:
	// more than 2 GiB per event is the same as no bound (sendfile(2) itself
	// sends less than 2 GiB per call).
	maxChunk int32
	// Own write watermarks (SetWriteWatermarks), saturated at 2 GiB; 0: the loop's.
	high, low int32

	idlePrev, idleNext int32 // the loop's idle list, while idle (idle.go)

	q        outQueue
	timer    Timer
	wtimer   Timer         // SetWriteTimeout's: runs while output is queued
	wtimeout time.Duration // 0: queued output may wait forever
	rl       *rateLimit    // SetRateLimit's; nil: no limit
	failErr  error         // a write failed; the loop closes the conn after the callback

	ctx    any
	remote addrPort
	local  addrPort
}

// addrPort is a connection's address in 20 bytes, where a netip.AddrPort takes
// 32 (its zone pointer, and padding). The kernel's addresses have no IPv6 zone;
// a dialled address keeps its zone for the connect, not in RemoteAddr.
type addrPort struct {
	ip   [16]byte
	port uint16
	fam  uint8 // 0: none, 4: IPv4 (in ip[12:]), 6: IPv6
}

func packAddr(a netip.AddrPort) addrPort {
	ip := a.Addr()
	switch {
	case ip.Is4():
		return addrPort{ip: ip.As16(), port: a.Port(), fam: 4}
	case ip.Is6():
		return addrPort{ip: ip.As16(), port: a.Port(), fam: 6}
	}
	return addrPort{}
}

func (a *addrPort) unpack() netip.AddrPort {
	switch a.fam {
	case 4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a.ip[12:])), a.port)
	case 6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.ip), a.port)
	}
	return netip.AddrPort{}
}

// clamp32 saturates a non-negative size at the int32 range.
func clamp32(n int) int32 { return int32(min(max(n, 0), math.MaxInt32)) }

var _ Conn = (*conn)(nil)

func (l *Loop) newConn(fd int, h Handler) *conn {
	c := l.freeConns.Get()
	*c = conn{}
	c.loop, c.h, c.fd = l, h, fd
	c.sendfile, c.maxChunk, c.inUnknown = !l.cfg.NoSendfile, clamp32(l.cfg.SendfileMaxChunk), true
	l.InitTimer(&c.timer, connTimerFired)
	l.InitTimer(&c.wtimer, connWriteTimerFired)
	return c
}

// Release tells the loop that the handler of closed connection c (OnClose has
// run) holds no reference to it any more, so that a later connection of the
// loop reuses its memory instead of allocating: after Release, c must not be
// used at all. A connection that is not closed, not this loop's own (a
// wrapper's, such as TLS's), or released already, is left to the garbage
// collector. Call it on the loop's thread.
func (l *Loop) Release(c Conn) {
	cc, ok := c.(*conn)
	// A failed write's entry in l.failed may still be on its way out.
	if !ok || cc.loop != l || cc.state != connClosed || cc.released || cc.failErr != nil {
		return
	}
	cc.released = true
	cc.h, cc.ctx = nil, nil
	l.freeConns.Release(cc)
}

// The connection's timers call plain functions that find the connection from the
// timer embedded in it: method values (c.onTimer) were two allocations per
// connection.
func connTimerFired(t *Timer) {
	(*conn)(unsafe.Add(unsafe.Pointer(t), -int(unsafe.Offsetof(conn{}.timer)))).onTimer(t)
}

func connWriteTimerFired(t *Timer) {
	(*conn)(unsafe.Add(unsafe.Pointer(t), -int(unsafe.Offsetof(conn{}.wtimer)))).onWriteTimer(t)
}

func (l *Loop) registerConn(c *conn, state connState) error {
	c.state = state
	c.gen = l.table.register(c.fd, slotConn, unsafe.Pointer(c))
	c.events = c.wantEvents()
	if err := l.epollAdd(c.fd, c.gen, c.events); err != nil {
		l.table.unregister(c.fd)
		return err
	}
	l.openConns.Add(1)
	return nil
}

// wantEvents is the epoll interest the connection's state calls for. The set
// is level-triggered: pausing a read is removing EPOLLIN, and output is
// polled only while something is queued.
func (c *conn) wantEvents() uint32 {
	var ev uint32
	switch c.state {
	case connConnecting:
		return unix.EPOLLOUT
	case connOpen:
		if !c.paused {
			ev = unix.EPOLLIN | unix.EPOLLRDHUP
		}
	}
	if c.q.size > 0 && (c.rl == nil || !c.rl.delayed) {
		ev |= unix.EPOLLOUT
	}
	return ev
}

func (c *conn) updateEvents() {
	if c.state == connClosed {
		return
	}
	if want := c.wantEvents(); want != c.events {
		if err := c.loop.epollMod(c.fd, c.gen, want); err != nil {
			c.fail(err)
			return
		}
		c.events = want
	}
}

// connEvent handles one epoll event for c, a panic closing c.
func (l *Loop) connEvent(c *conn, ev uint32) {
	defer l.recoverConn(c)
	l.handleEvent(c, ev)
}

// handleEvent handles one epoll event for c. Its caller contains a panic
// (connEvent, or a batch's dispatch).
func (l *Loop) handleEvent(c *conn, ev uint32) {
	switch c.state {
	case connClosed:
		return
	case connConnecting:
		c.finishConnect()
		return
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.q.size > 0 {
		if err := c.flush(); err != nil {
			c.closeNow(err)
			return
		}
	}
	if c.state == connOpen && !c.paused && ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.read()
		return
	}
	if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.state != connClosed {
		c.closeNow(c.socketError("connection lost"))
	}
}

// recoverConn turns a handler panic into closing that connection.
func (l *Loop) recoverConn(c *conn) {
	if r := recover(); r != nil {
		l.connPanic(c, r)
	}
}

func (l *Loop) connPanic(c *conn, r any) {
	l.panics.Add(1)
	l.log.Error("panic in connection handler; closing the connection",
		"panic", r, "fd", c.fd, "remote", c.RemoteAddr(), "stack", string(debug.Stack()))
	c.closeNow(&PanicError{Value: r})
}

func (l *Loop) callOpen(c *conn) {
	defer l.recoverConn(c)
	c.h.OnOpen(c)
}

func (l *Loop) callClose(c *conn, err error) {
	defer l.recoverTask("OnClose")
	c.h.OnClose(c, err)
}

// socketError returns the pending SO_ERROR, or a generic error naming what happened.
func (c *conn) socketError(what string) error {
	errno, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && errno != 0 {
		return fmt.Errorf("%s: %w", what, unix.Errno(errno))
	}
	return fmt.Errorf("%s: %w", what, unix.ECONNRESET)
}

func (c *conn) onTimer(*Timer) {
	defer c.loop.recoverConn(c)
	switch c.state {
	case connConnecting:
		c.closeNow(fmt.Errorf("connect %s: %w", c.RemoteAddr(), ErrDialTimeout))
	case connOpen, connClosing:
		c.h.OnTimeout(c)
	}
}

// onWriteTimer: the socket took none of the queued output for wtimeout.
func (c *conn) onWriteTimer(*Timer) {
	if c.state == connOpen || c.state == connClosing {
		if c.resetOnWTimeout {
			c.setLingerReset()
		}
		c.closeNow(fmt.Errorf("write to %s: %w", c.RemoteAddr(), ErrWriteTimeout))
	}
}

// closeErrs are the errors a graceful close may end with (closeGraceful's
// callers), kept as a byte in the connection rather than a 16-byte interface.
var closeErrs = [...]error{nil, io.EOF, ErrDraining, ErrReused}

// closeErr is the OnClose error of a graceful close that completes.
func (c *conn) closeErr() error { return closeErrs[c.closeWhy] }

// closeGraceful stops reading and closes once queued output is sent; err is
// one of closeErrs (another closes at once).
func (c *conn) closeGraceful(err error) {
	if c.state == connClosed || c.state == connClosing {
		return
	}
	if c.idle {
		c.setIdle(false) // closing: no longer there to reuse or drain
	}
	why := slices.Index(closeErrs[:], err)
	if c.q.size == 0 || c.state == connConnecting || why < 0 {
		c.closeNow(err)
		return
	}
	c.state, c.closeWhy = connClosing, uint8(why)
	c.updateEvents()
}

// closeNow closes the socket at once, dropping queued output, and tells the handler.
func (c *conn) closeNow(err error) {
	if c.state == connClosed {
		return
	}
	l := c.loop
	c.state = connClosed
	if c.idle {
		c.setIdle(false)
	}
	c.timer.Stop()
	c.wtimer.Stop()
	if c.rl != nil {
		c.rl.timer.Stop()
		c.rl = nil
	}
	c.q.release(l.pool)
	c.q.recycle(l)
	l.table.unregister(c.fd)
	// close(2) takes the fd out of the epoll set; no EPOLL_CTL_DEL (a system call
	// per connection). If a forked child holds the socket until its exec (binary
	// upgrade), the registration outlives the fd for that moment: its events carry
	// the old generation and are dropped as stale.
	if len(l.corked) > 0 {
		l.uncorkForClose(c)
	}
	_ = rawClose(c.fd)
	l.openConns.Add(-1)
	l.closed.Add(1)
	l.callClose(c, err)
	l.resumeAllAccept()
	l.checkDrained()
}

// fail records a write-side failure; the loop closes c after the current callback.
func (c *conn) fail(err error) {
	if c.failErr == nil {
		c.failErr = err
		c.loop.failed = append(c.loop.failed, c)
	}
}

// Close implements Conn. A second Close while the queue is still flushing
// closes at once, dropping what is left (e.g. from OnTimeout on a stuck peer).
func (c *conn) Close() error {
	switch c.state {
	case connClosed:
		return ErrClosed
	case connClosing:
		c.closeNow(c.closeErr())
		return nil
	}
	c.closeGraceful(nil)
	return nil
}

// CloseWrite implements Conn.
func (c *conn) CloseWrite() {
	if c.shutWr || c.state != connOpen {
		return
	}
	c.shutWr = true
	if c.q.size == 0 {
		if err := c.shutdownWrite(); err != nil {
			c.fail(err)
		}
	}
}

// shutdownWrite sends FIN; flush calls it once the last queued byte went out.
func (c *conn) shutdownWrite() error {
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// PauseRead implements Conn.
func (c *conn) PauseRead() {
	if !c.paused {
		c.paused = true
		c.inUnknown = true // input may arrive unreported
		c.updateEvents()
	}
}

// ResumeRead implements Conn.
func (c *conn) ResumeRead() {
	if c.paused {
		c.paused = false
		c.updateEvents()
	}
}

// SetIdle implements Conn.
func (c *conn) SetIdle(idle bool) {
	if c.state != connOpen {
		return // connecting, or closing: never idle
	}
	if idle && c.loop.draining() {
		c.closeGraceful(ErrDraining)
		return
	}
	c.setIdle(idle)
}

// SetTimeout implements Conn.
func (c *conn) SetTimeout(d time.Duration) {
	if c.state == connClosed {
		return
	}
	if d <= 0 {
		c.timer.cancel() // closeNow Stops it
		return
	}
	c.timer.Reset(d)
}

// SetWriteTimeout implements Conn.
func (c *conn) SetWriteTimeout(d time.Duration) {
	c.wtimeout = max(d, 0)
	switch {
	case d <= 0:
		c.wtimer.Stop()
	case c.state != connClosed:
		c.armWriteTimeout()
	}
}

// SetResetOnWriteTimeout implements Conn.
func (c *conn) SetResetOnWriteTimeout(on bool) { c.resetOnWTimeout = on }

// Reset implements Conn.
func (c *conn) Reset() {
	if c.state == connClosed {
		return
	}
	c.setLingerReset()
	c.closeNow(nil)
}

// setLingerReset makes close(2) send an RST and drop the socket's send queue.
func (c *conn) setLingerReset() {
	_ = unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
}

// SetWriteWatermarks implements Conn.
func (c *conn) SetWriteWatermarks(high, low int) {
	if high <= 0 {
		c.high, c.low = 0, 0
		return
	}
	c.high, c.low = clamp32(high), clamp32(min(max(low, 0), high-1))
}

// highWater and lowWater are the watermarks in effect.
func (c *conn) highWater() int {
	if c.high > 0 {
		return int(c.high)
	}
	return c.loop.cfg.WriteHighWater
}

func (c *conn) lowWater() int {
	if c.high > 0 {
		return int(c.low)
	}
	return c.loop.cfg.WriteLowWater
}

// Queued implements Conn.
func (c *conn) Queued() int { return c.q.size }

// Fd implements Conn.
func (c *conn) Fd() int { return c.fd }

// InputReady implements InputReadier.
func (c *conn) InputReady() (ready, known bool) { return c.inMore, !c.inUnknown }

// RemoteAddr implements Conn.
func (c *conn) RemoteAddr() netip.AddrPort { return c.remote.unpack() }

// LocalAddr implements Conn; the first call asks the kernel.
func (c *conn) LocalAddr() netip.AddrPort {
	if !c.localLoaded && c.state != connClosed {
		if a, err := localAddr(c.fd); err == nil {
			c.local, c.localLoaded = packAddr(a), true
		}
	}
	return c.local.unpack()
}

// Context implements Conn.
func (c *conn) Context() any { return c.ctx }

// SetContext implements Conn.
func (c *conn) SetContext(v any) { c.ctx = v }

// Loop implements Conn.
func (c *conn) Loop() *Loop { return c.loop }
