package tls

import (
	"context"
	stdtls "crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

type connState uint8

const (
	stateHandshake connState = iota
	stateSettling            // handshake done, record path being chosen
	stateOpen                // userspace records; the inner handler has the Conn
	stateClosing             // Close called or the peer ended; the raw conn flushes
	stateClosed
	stateKernel // handed to kTLS: the inner handler has the raw conn
)

// readMode says how the transport hands input to crypto/tls.
type readMode uint8

const (
	// modeRecords: up to the end of the current record, and when empty the
	// handshake coroutine yields for more.
	modeRecords readMode = iota
	// modeWhole: complete records only, else would-block (draining what came
	// with the handshake before the kernel takes over at a record boundary).
	modeWhole
	// modeStream: everything there is, else would-block.
	modeStream
)

// Conn is a TLS connection whose records crypto/tls handles on the loop. It
// implements eventloop.Conn for the inner handler; its methods must be called
// on the loop's thread.
type Conn struct {
	layer *Layer
	raw   eventloop.Conn
	sc    *ServerConfig
	tc    *stdtls.Conn
	tr    transport
	state connState
	mode  readMode
	ctx   any

	// handshake
	next    func() (struct{}, bool)
	stop    func()
	yield   func(struct{}) bool
	hsErr   error
	hsDone  bool
	hsBytes int

	// input: pending (kept across callbacks) before src (the loop's buffer, this
	// callback only); the current record's header as seen so far
	src, pending []byte
	hdr          [5]byte
	hdrN         int
	bodyLeft     int
	records      int // complete records handed to crypto/tls
	recordsAtHS  int // records at the end of the handshake
	consumed     int // reads since the handshake that returned a record's data

	// what kTLS needs, from the key log and the first ServerHello written
	clientRandom, serverRandom [32]byte
	haveServerRandom           bool
	master                     []byte // TLS 1.2
	clientSecret, serverSecret []byte // TLS 1.3 application traffic secrets
	appSecrets                 bool   // the server's application key is in use
	appTickets                 int    // session tickets sent under it
	wroteAfterHandshake        bool

	opened     bool // the inner handler has the Conn
	paused     bool
	stalled    bool // delivery stopped with input left inside crypto/tls
	kick       eventloop.Timer
	kickInit   bool
	inWrite    bool
	held       []byte // plaintext of a partial record held back (WritevMore): a pool buffer, nil when none
	blockedDue bool   // OnWriteBlocked arrived inside a write, for after it
	closeErr   error

	// client: a connection to an upstream (Client.Dial), the handshake bounded
	// by hsTimeout; what the inner handler wrote before it ended waits in early.
	client    *ClientConfig
	hsTimeout time.Duration
	early     []byte

	rejected bool // ssl_reject_handshake: the alert crypto/tls sends becomes unrecognized_name

	info         Info
	ticketSID    [32]byte // the identifier in the ticket offered, for a resumption
	hasTicketSID bool
}

var _ eventloop.Conn = (*Conn)(nil)

// wouldBlock is the transport's "no input now": Temporary, so crypto/tls does not
// keep it as the connection's error once the handshake is done.
type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls transport: no input buffered" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

var errWouldBlock error = wouldBlock{}

// unrecognizedName is a fatal unrecognized_name alert record (RFC 8446 6.2).
var unrecognizedName = []byte{21, 3, 3, 0, 2, 2, 112}

var (
	errHandshakeTooLarge = errors.New("tls: client sent too much before its handshake completed")
	errHandshakeTimeout  = errors.New("tls: handshake timed out")
)

// onData takes input from the loop.
func (c *Conn) onData(data []byte) {
	switch c.state {
	case stateHandshake:
		if c.hsBytes == 0 && c.client == nil && c.layer.opts.PlainHTTP && len(data) > 0 && data[0] != 22 && data[0]&0x80 == 0 {
			c.plainHTTP(data) // not a handshake record, nor SSLv2's
			return
		}
		c.hsBytes += len(data)
		if c.hsBytes > c.layer.opts.MaxHandshakeBytes {
			c.failHandshake(errHandshakeTooLarge)
			return
		}
		c.src = data
		c.resume()
	case stateOpen:
		c.src = data
		c.deliver()
	}
}

// plainHTTP hands a connection that sent plain HTTP to the inner handler,
// marked so that its request is answered with nginx's 497.
func (c *Conn) plainHTTP(data []byte) {
	l := c.layer
	c.state = stateClosed
	raw := c.raw
	kcn := &kconn{Conn: raw, plain: true}
	raw.SetContext(kcn)
	raw.SetTimeout(0)
	l.watch, l.watchClosed = raw, false
	l.inner.OnOpen(kcn)
	if !l.watchClosed {
		l.inner.OnData(kcn, data)
	}
	l.watch = nil
}

// resume runs the handshake until it needs input or ends.
func (c *Conn) resume() {
	l := c.layer
	if c.next == nil {
		if c.client != nil {
			c.tc = stdtls.Client(&c.tr, l.clientConfig(c.client))
		} else {
			c.tc = stdtls.Server(&c.tr, l.config(c.sc))
		}
		c.next, c.stop = iter.Pull(c.handshake)
	}
	l.cur = c
	_, more := c.next()
	l.cur = nil
	if more {
		return // waiting for input; all of src went to crypto/tls
	}
	c.next, c.stop = nil, nil
	if !c.hsDone || c.hsErr != nil {
		err := c.hsErr
		if err == nil {
			err = errors.New("tls: handshake stopped")
		}
		c.failHandshake(err)
		return
	}
	c.established()
}

// handshake is the coroutine's body.
func (c *Conn) handshake(yield func(struct{}) bool) {
	c.yield = yield
	c.hsErr = c.tc.HandshakeContext(context.Background())
	c.hsDone = true
	c.yield = nil
}

// failHandshake ends a connection whose handshake did not complete; alerts
// crypto/tls wrote are flushed first.
func (c *Conn) failHandshake(err error) {
	if c.state != stateHandshake {
		return
	}
	c.state = stateClosing
	c.abandon()
	l := c.layer
	l.stats.Failures.Add(1)
	if err == errHandshakeTimeout {
		l.stats.Timeouts.Add(1)
	}
	l.cur = nil
	if c.client != nil {
		// The upstream's handler hears of it as the connection's end.
		c.closeErr = fmt.Errorf("SSL handshake with upstream: %w", err)
		if err == errHandshakeTimeout {
			c.closeErr = fmt.Errorf("SSL handshake with upstream: %w", eventloop.ErrDialTimeout)
		}
	} else if log := c.raw.Loop(); log != nil {
		log.Logger().Info("TLS handshake failed", "client", c.raw.RemoteAddr().String(), "err", err.Error())
	}
	c.raw.Close()
}

// abandon ends a suspended handshake coroutine: its transport read fails and
// crypto/tls returns.
func (c *Conn) abandon() {
	if c.stop != nil {
		stop := c.stop
		c.next, c.stop = nil, nil
		c.layer.cur = c
		stop()
		c.layer.cur = nil
	}
	c.src = nil
}

// established picks the record path once the handshake is done and opens the
// inner handler's side.
func (c *Conn) established() {
	l := c.layer
	c.state = stateSettling
	c.recordsAtHS = c.records
	c.raw.SetTimeout(0)
	cs := c.tc.ConnectionState()
	if cs.DidResume {
		l.stats.Resumed.Add(1)
		if c.hasTicketSID && !c.info.hasSID {
			c.info.sid, c.info.hasSID = c.ticketSID, true
		}
	}
	c.info.set(&cs)
	if c.client != nil {
		c.state, c.opened, c.mode = stateOpen, true, modeStream
		if len(c.early) > 0 {
			early := c.early
			c.early = nil
			if _, err := c.Write(early); err != nil {
				return
			}
		}
		l.inner.OnOpen(c)
		if c.state == stateOpen {
			c.deliver()
		}
		return
	}
	held := 0
	if l.support != nil {
		var done bool
		if held, done = c.toKernel(cs); done {
			return
		}
	}
	l.stats.Userspace.Add(1)
	c.wipeSecrets()
	c.mode = modeStream
	c.state, c.opened = stateOpen, true
	l.inner.OnOpen(c)
	if held > 0 && c.state == stateOpen {
		l.inner.OnData(c, l.plain[:held])
	}
	c.deliver()
}

// toKernel tries the kTLS path. It decrypts in userspace what arrived with the
// handshake, up to a record boundary (reading the rest of a cut record from the
// socket), installs the keys with the sequence numbers that follow, and hands
// the raw conn to the inner handler with the plaintext. done is false when the
// connection stays in userspace, then held bytes of l.plain are its first input.
func (c *Conn) toKernel(cs stdtls.ConnectionState) (held int, done bool) {
	l := c.layer
	kc := kernelCipherOf(cs.CipherSuite)
	if !l.support.Has(cs.Version, kc) {
		return 0, false
	}
	fallback := func(n int) (int, bool) {
		l.stats.KTLSFallbacks.Add(1)
		return n, false
	}
	if cs.Version == stdtls.VersionTLS12 && c.master == nil {
		return fallback(0) // a resumed TLS 1.2 session: crypto/tls logs no key
	}
	if cs.Version == stdtls.VersionTLS12 && !c.haveServerRandom ||
		cs.Version == stdtls.VersionTLS13 && (c.clientSecret == nil || c.serverSecret == nil) {
		return fallback(0)
	}
	c.mode = modeWhole
	n, err := c.readPlain(l.plain)
	if err == nil && len(c.src) > 0 && len(l.plain)-n >= maxPlaintext && c.completeTail() {
		var k int
		k, err = c.readPlain(l.plain[n:])
		n += k
	}
	switch {
	case err != nil:
		c.readFailed(err)
		return 0, true
	case len(c.src) > 0 || c.hdrN > 0 || c.wroteAfterHandshake:
		// Not at a record boundary, or crypto/tls sent something (a KeyUpdate
		// answer) that moved its sequence: userspace keeps the connection.
		c.mode = modeStream
		return fallback(n)
	}
	var tx, rx *trafficKeys
	if cs.Version == stdtls.VersionTLS13 {
		if tx, err = keys13(kc, c.serverSecret); err == nil {
			rx, err = keys13(kc, c.clientSecret)
		}
		if err != nil {
			return fallback(n)
		}
		tx.seq = uint64(c.appTickets)
		rx.seq = uint64(c.records - c.recordsAtHS)
	} else {
		tx, rx = keys12(kc, c.master, c.clientRandom[:], c.serverRandom[:])
		tx.seq = 1                                   // the server's Finished
		rx.seq = 1 + uint64(c.records-c.recordsAtHS) // after the client's Finished
	}
	err = installKTLS(c.raw.Fd(), cs.Version, kc, tx, rx)
	tx.wipe()
	rx.wipe()
	c.wipeSecrets()
	if err != nil {
		if errors.Is(err, errHalfInstalled) {
			c.readFailed(err)
			return 0, true
		}
		c.raw.Loop().Logger().Warn("kTLS install failed; the connection stays in userspace", "err", err.Error())
		return fallback(n)
	}
	l.stats.KTLS.Add(1)
	c.state = stateKernel
	c.tc, c.src = nil, nil
	raw := c.raw
	kcn := &kconn{Conn: raw, info: c.info}
	raw.SetContext(kcn)
	l.watch, l.watchClosed = raw, false
	l.inner.OnOpen(kcn)
	if n > 0 && !l.watchClosed {
		if _, err := raw.Write(nil); err == nil { // still open: not closing, not closed
			l.inner.OnData(kcn, l.plain[:n])
		}
	}
	l.watch = nil
	return 0, true
}

// completeTail reads from the socket exactly the rest of the record that src
// ends in, so that the kernel starts at a record boundary. It reports false when
// the rest is not there yet; src then holds what there is.
func (c *Conn) completeTail() bool {
	l := c.layer
	if len(c.src) >= len(l.tail) {
		return false // no record is that long: crypto/tls will say so
	}
	tail := l.tail[:copy(l.tail, c.src)]
	c.src = tail
	need := 5
	for {
		if len(tail) >= 5 {
			need = 5 + int(binary.BigEndian.Uint16(tail[3:5]))
			if need > len(l.tail) {
				return false // oversized: crypto/tls will say so
			}
		}
		if len(tail) >= need {
			return true
		}
		k, err := unix.Read(c.raw.Fd(), l.tail[len(tail):need])
		if err != nil || k <= 0 {
			return false
		}
		tail = l.tail[:len(tail)+k]
		c.src = tail
	}
}

func (c *Conn) wipeSecrets() {
	clear(c.master)
	clear(c.clientSecret)
	clear(c.serverSecret)
	c.master, c.clientSecret, c.serverSecret = nil, nil, nil
}

// readPlain decrypts into buf until crypto/tls has nothing it can open, or buf
// has less room than a record's plaintext; err is nil then.
//
// Every read gets room for a whole record, so each read that returns data has
// taken one record (and maybe non-data records before it) out of crypto/tls:
// counting them against the complete records handed over tells when
// crypto/tls holds nothing, without a read that would fail for want of input
// (each read that reaches the transport allocates inside crypto/tls).
func (c *Conn) readPlain(buf []byte) (int, error) {
	n := 0
	for len(buf)-n >= maxPlaintext && c.readable() {
		k, err := c.tc.Read(buf[n:])
		n += k
		if k > 0 {
			c.consumed++
		}
		if err != nil {
			if err == errWouldBlock {
				c.consumed = c.records - c.recordsAtHS // nothing complete is left inside
				return n, nil
			}
			return n, err
		}
	}
	return n, nil
}

// readable reports whether a read may find something: input not yet handed to
// crypto/tls, or complete records it has not returned.
func (c *Conn) readable() bool {
	return len(c.src) > 0 || len(c.pending) > 0 || c.records-c.recordsAtHS > c.consumed || c.mode != modeStream
}

// deliver decrypts input and hands it to the inner handler until crypto/tls
// needs more, the handler pauses or the connection ends.
func (c *Conn) deliver() {
	l := c.layer
	c.stalled = false
	for c.state == stateOpen {
		if c.paused {
			c.stalled = c.readable()
			break
		}
		n, err := c.readPlain(l.plain)
		if n > 0 {
			l.inner.OnData(c, l.plain[:n])
		}
		if err != nil {
			if c.state == stateOpen {
				c.readFailed(err)
			}
			break
		}
		if !c.readable() {
			break
		}
	}
	c.keepSrc()
}

// keepSrc copies what is left of the loop's buffer before the callback returns.
func (c *Conn) keepSrc() {
	if len(c.src) > 0 && c.state == stateOpen {
		c.pending = append(c.pending, c.src...)
	}
	c.src = nil
}

// readFailed ends the connection after crypto/tls's read failed: close_notify
// (io.EOF) is the peer's orderly end, anything else a TLS error whose alert
// crypto/tls already queued.
func (c *Conn) readFailed(err error) {
	if err == io.EOF {
		c.closeErr = io.EOF
		c.FlushHeld() // a response in progress goes out before close_notify
		if c.tc != nil {
			_ = c.tc.CloseWrite() // answer close_notify
		}
	} else {
		c.closeErr = fmt.Errorf("tls: %w", err)
	}
	c.dropHeld()
	c.state = stateClosing
	c.src, c.pending = nil, nil
	c.raw.Close()
}

func (c *Conn) onTimeout() {
	switch c.state {
	case stateHandshake:
		c.failHandshake(errHandshakeTimeout)
	case stateOpen, stateClosing:
		c.layer.inner.OnTimeout(c)
	}
}

func (c *Conn) onWriteBlocked() {
	if c.state != stateOpen && c.state != stateClosing {
		return
	}
	if c.inWrite {
		c.blockedDue = true
		return
	}
	c.layer.inner.OnWriteBlocked(c)
}

func (c *Conn) onWritable() {
	if c.state == stateOpen || c.state == stateClosing {
		c.layer.inner.OnWritable(c)
	}
}

func (c *Conn) onClose(err error) {
	prev := c.state
	c.state = stateClosed
	if c.kickInit {
		c.kick.Stop()
	}
	c.dropHeld()
	c.src, c.pending = nil, nil
	if prev == stateHandshake {
		c.layer.stats.Failures.Add(1)
		c.abandon()
		c.tc = nil
		c.wipeSecrets()
		if c.client != nil {
			c.layer.inner.OnClose(c, err)
		}
		return
	}
	if c.client != nil && !c.opened {
		if c.closeErr != nil {
			err = c.closeErr
		}
		c.layer.inner.OnClose(c, err)
		return
	}
	c.tc = nil
	c.wipeSecrets()
	if c.opened {
		if err == nil && c.closeErr != nil {
			err = c.closeErr
		}
		c.layer.inner.OnClose(c, err)
	}
}

// onKick delivers input left inside crypto/tls when reading resumed.
func (c *Conn) onKick(*eventloop.Timer) {
	if c.state == stateOpen && !c.paused {
		c.deliver()
	}
}

// Write implements eventloop.Conn: p, after any plaintext held back
// (WritevMore), is sealed into records sent with one socket write (queued as
// the raw conn queues).
func (c *Conn) Write(p []byte) (int, error) {
	if c.client != nil && c.state == stateHandshake {
		c.early = append(c.early, p...)
		return len(p), nil
	}
	if c.state != stateOpen {
		return 0, eventloop.ErrClosed
	}
	if len(p) == 0 && c.held == nil {
		return 0, nil
	}
	l := c.layer
	l.one[0] = p
	n, err := c.writev(l.one[:], false)
	l.one[0] = nil
	return n, err
}

// Writev implements eventloop.Conn: the pieces (after any plaintext held back)
// are gathered into full records, sent with one socket write.
func (c *Conn) Writev(bufs [][]byte) (int, error) {
	if c.client != nil && c.state == stateHandshake {
		n := 0
		for _, b := range bufs {
			c.early = append(c.early, b...)
			n += len(b)
		}
		return n, nil
	}
	if c.state != stateOpen {
		return 0, eventloop.ErrClosed
	}
	return c.writev(bufs, false)
}

// WritevMore is Writev for bytes that more will follow (a response body in
// the middle): full records are sealed and sent, the plaintext of a partial
// one is held back to fill it with the next write. Held bytes go out with the
// next write, at FlushHeld, Close or CloseWrite, and at the end of the loop's
// batch at the latest, so that they never wait for input: a proxied
// response's records fill with what one upstream read brought (nginx fills
// its ssl_buffer_size buffer the same way).
func (c *Conn) WritevMore(bufs [][]byte) (int, error) {
	if c.state != stateOpen || c.client != nil {
		return c.Writev(bufs)
	}
	return c.writev(bufs, true)
}

// FlushHeld sends the plaintext held back by WritevMore now.
func (c *Conn) FlushHeld() error {
	if c.held == nil || c.state != stateOpen {
		return nil
	}
	_, err := c.writev(nil, false)
	return err
}

// writev seals the held plaintext and bufs into records of recordBytes
// (pieces of a whole record or more are sealed where they lie, the rest
// gathered) and sends them; with more, the plaintext of a last partial record
// is held back.
func (c *Conn) writev(bufs [][]byte, more bool) (int, error) {
	l := c.layer
	c.beginWrite()
	rs := c.recordBytes()
	stage := c.held
	if stage == nil {
		stage = l.stage[:0:rs]
		if more && lenAll(bufs) < rs {
			c.hold(nil) // all of it will be held: gathered there, not copied twice
			stage = c.held
		}
	}
	total := 0
	var err error
	for _, b := range bufs {
		total += len(b)
		for len(b) > 0 && err == nil {
			if len(stage) == 0 && len(b) >= rs {
				k := rs // crypto/tls splits at 16k itself, not below
				if rs == maxPlaintext {
					k = len(b) &^ (maxPlaintext - 1)
				}
				_, err = c.tc.Write(b[:k])
				b = b[k:]
				continue
			}
			k := copy(stage[len(stage):rs], b)
			stage, b = stage[:len(stage)+k], b[k:]
			if len(stage) == rs {
				_, err = c.tc.Write(stage)
				stage = stage[:0]
			}
		}
	}
	switch {
	case err != nil:
		c.dropHeld()
	case more && len(stage) > 0:
		c.hold(stage)
	default:
		if len(stage) > 0 {
			_, err = c.tc.Write(stage)
		}
		c.dropHeld()
	}
	return c.endWrite(total, err)
}

func lenAll(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// hold keeps stage, a partial record's plaintext, in the connection's held
// buffer (a pool buffer while there is something held) until the next write
// or the end of the batch.
func (c *Conn) hold(stage []byte) {
	if c.held != nil {
		c.held = stage // it is the held buffer
		return
	}
	l := c.layer
	buf := c.raw.Loop().Pool().Get(maxPlaintext)
	c.held = buf[:copy(buf, stage)]
	if !l.flushInit {
		c.raw.Loop().InitBatchEnd(&l.flushAt, l.flushHolding)
		l.flushInit = true
	}
	l.holding = append(l.holding, c)
	l.flushAt.Arm()
}

// dropHeld gives the held buffer back.
func (c *Conn) dropHeld() {
	if c.held != nil {
		c.raw.Loop().Pool().Put(c.held[:cap(c.held)])
		c.held = nil
	}
}

// flushHolding sends, at the end of the loop's batch, what connections held
// back during it.
func (l *Layer) flushHolding() {
	for i := 0; i < len(l.holding); i++ {
		c := l.holding[i]
		l.holding[i] = nil
		c.FlushHeld()
	}
	l.holding = l.holding[:0]
}

// recordBytes is the plaintext of a full record: ssl_buffer_size, at most 16k
// (16k for upstream connections).
func (c *Conn) recordBytes() int {
	if c.sc == nil || c.sc.RecordSize <= 0 || c.sc.RecordSize >= maxPlaintext {
		return maxPlaintext
	}
	return c.sc.RecordSize
}

func (c *Conn) beginWrite() {
	c.inWrite = true
	c.layer.batch = c
}

// endWrite sends the batched records and replays a watermark crossed meanwhile.
func (c *Conn) endWrite(n int, err error) (int, error) {
	l := c.layer
	l.batch = nil
	if ferr := c.flushOut(); err == nil {
		err = ferr
	}
	c.inWrite = false
	if c.blockedDue {
		c.blockedDue = false
		if c.state == stateOpen || c.state == stateClosing {
			l.inner.OnWriteBlocked(c)
		}
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// flushOut writes the batched records to the raw conn. The buffer is reset
// before the write: the raw conn has taken (sent or queued) all of it before
// any callback the write triggers could add more.
func (c *Conn) flushOut() error {
	l := c.layer
	if len(l.out) == 0 {
		return nil
	}
	buf := l.out
	l.out = l.out[:0]
	_, err := c.raw.Write(buf)
	return err
}

// Close implements eventloop.Conn: close_notify, then the raw conn's Close.
func (c *Conn) Close() error {
	switch c.state {
	case stateClosed:
		return eventloop.ErrClosed
	case stateClosing:
		return c.raw.Close()
	case stateHandshake: // an upstream connection given up while handshaking
		c.state = stateClosing
		c.abandon()
		c.early = nil
		return c.raw.Close()
	}
	c.FlushHeld()
	c.state = stateClosing
	if c.tc != nil {
		_ = c.tc.CloseWrite()
	}
	return c.raw.Close()
}

// PauseRead implements eventloop.Conn.
func (c *Conn) PauseRead() {
	c.paused = true
	c.raw.PauseRead()
}

// ResumeRead implements eventloop.Conn. Input already inside crypto/tls is
// delivered from a timer callback, never from inside this call.
func (c *Conn) ResumeRead() {
	if !c.paused {
		return
	}
	c.paused = false
	c.raw.ResumeRead()
	if c.stalled && c.state == stateOpen {
		if !c.kickInit {
			c.raw.Loop().InitTimer(&c.kick, c.onKick)
			c.kickInit = true
		}
		c.kick.Reset(0)
	}
}

// SetIdle implements eventloop.Conn.
func (c *Conn) SetIdle(idle bool) { c.raw.SetIdle(idle) }

// SetTimeout implements eventloop.Conn.
func (c *Conn) SetTimeout(d time.Duration) { c.raw.SetTimeout(d) }

// Queued implements eventloop.Conn: the sealed bytes waiting in the raw conn,
// and the plaintext held back.
func (c *Conn) Queued() int { return c.raw.Queued() + len(c.held) }

// SetWriteTimeout implements eventloop.Conn.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.raw.SetWriteTimeout(d) }

// SetResetOnWriteTimeout implements eventloop.Conn.
func (c *Conn) SetResetOnWriteTimeout(on bool) { c.raw.SetResetOnWriteTimeout(on) }

// SetRateLimit implements eventloop.Conn (on the bytes on the wire).
func (c *Conn) SetRateLimit(rate, after int64) { c.raw.SetRateLimit(rate, after) }

// Reset implements eventloop.Conn: no close_notify, as nginx after a timeout.
func (c *Conn) Reset() {
	c.dropHeld()
	c.raw.Reset()
}

// SetWriteWatermarks implements eventloop.Conn (on sealed bytes).
func (c *Conn) SetWriteWatermarks(high, low int) { c.raw.SetWriteWatermarks(high, low) }

// Fd implements eventloop.Conn.
func (c *Conn) Fd() int { return c.raw.Fd() }

// Raw returns the connection under TLS (a PROXY protocol layer's, for its header).
func (c *Conn) Raw() eventloop.Conn { return c.raw }

// LocalAddr implements eventloop.Conn.
func (c *Conn) LocalAddr() netip.AddrPort { return c.raw.LocalAddr() }

// RemoteAddr implements eventloop.Conn.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.raw.RemoteAddr() }

// Context implements eventloop.Conn.
func (c *Conn) Context() any { return c.ctx }

// SetContext implements eventloop.Conn.
func (c *Conn) SetContext(v any) { c.ctx = v }

// Loop implements eventloop.Conn.
func (c *Conn) Loop() *eventloop.Loop { return c.raw.Loop() }

// transport is the net.Conn crypto/tls reads and writes: input from the loop's
// callbacks, output to the raw conn.
type transport struct{ c *Conn }

// Read implements net.Conn.
func (t *transport) Read(p []byte) (int, error) {
	c := t.c
	for {
		if n := c.take(p); n > 0 {
			return n, nil
		}
		if c.yield == nil {
			return 0, errWouldBlock // not in the handshake coroutine
		}
		if !c.yield(struct{}{}) {
			return 0, net.ErrClosed
		}
	}
}

// take copies input into p as the read mode allows, following the record
// framing of what it hands over.
func (c *Conn) take(p []byte) int {
	buf := &c.pending
	if len(*buf) == 0 {
		buf = &c.src
	}
	in := *buf
	if len(in) == 0 || len(p) == 0 {
		return 0
	}
	var n int
	switch {
	case c.mode == modeStream:
		n = copy(p, in)
		c.frame(in[:n])
	case c.hdrN < 5:
		if c.mode == modeWhole && c.hdrN == 0 && !wholeRecord(in) {
			return 0
		}
		n = copy(p[:min(len(p), 5-c.hdrN)], in)
		c.frame(in[:n])
	default:
		n = copy(p[:min(len(p), c.bodyLeft)], in)
		c.frame(in[:n])
	}
	*buf = in[n:]
	if len(*buf) == 0 && buf == &c.pending {
		c.pending = nil
	}
	return n
}

// frame advances the record framing over bytes handed to crypto/tls.
func (c *Conn) frame(b []byte) {
	for len(b) > 0 {
		if c.hdrN < 5 {
			k := copy(c.hdr[c.hdrN:], b)
			c.hdrN += k
			b = b[k:]
			if c.hdrN == 5 {
				c.bodyLeft = int(binary.BigEndian.Uint16(c.hdr[3:5]))
				if c.bodyLeft == 0 {
					c.hdrN = 0
					c.records++
				}
			}
			continue
		}
		k := min(len(b), c.bodyLeft)
		c.bodyLeft -= k
		b = b[k:]
		if c.bodyLeft == 0 {
			c.hdrN = 0
			c.records++
		}
	}
}

// wholeRecord reports whether in starts with a complete record.
func wholeRecord(in []byte) bool {
	return len(in) >= 5 && len(in) >= 5+int(binary.BigEndian.Uint16(in[3:5]))
}

// Write implements net.Conn: crypto/tls's records go to the raw conn, batched
// while the inner handler's write is sealed.
func (t *transport) Write(b []byte) (int, error) {
	c := t.c
	if c.rejected && len(b) >= 7 && b[0] == 21 {
		// crypto/tls answers a GetConfigForClient error with internal_error;
		// nginx's rejection is a fatal unrecognized_name, before any key.
		if _, err := c.raw.Write(unrecognizedName); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if c.state == stateHandshake && !c.haveServerRandom && len(b) >= 43 && b[0] == 22 && b[5] == 2 {
		// The first ServerHello: TLS 1.2's key block needs its random.
		copy(c.serverRandom[:], b[11:43])
		c.haveServerRandom = true
	}
	if c.hsDone && c.mode == modeWhole {
		c.wroteAfterHandshake = true
	}
	l := c.layer
	if l.batch == c {
		l.out = append(l.out, b...)
		if len(l.out) >= outFlushBytes {
			if err := c.flushOut(); err != nil {
				return 0, err
			}
		}
		return len(b), nil
	}
	if c.state == stateClosed {
		return 0, net.ErrClosed
	}
	return c.raw.Write(b)
}

// Close implements net.Conn; the Conn closes the raw conn itself.
func (t *transport) Close() error { return nil }

// LocalAddr implements net.Conn.
func (t *transport) LocalAddr() net.Addr { return net.TCPAddrFromAddrPort(t.c.raw.LocalAddr()) }

// RemoteAddr implements net.Conn.
func (t *transport) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(t.c.raw.RemoteAddr()) }

// SetDeadline implements net.Conn; the layer times handshakes with the loop's timer.
func (t *transport) SetDeadline(time.Time) error { return nil }

// SetReadDeadline implements net.Conn.
func (t *transport) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline implements net.Conn.
func (t *transport) SetWriteDeadline(time.Time) error { return nil }

// CloseWrite implements eventloop.Conn: close_notify, then the raw conn's
// CloseWrite (FIN once the records are sent); reading goes on.
func (c *Conn) CloseWrite() {
	if c.state != stateOpen {
		return
	}
	c.FlushHeld()
	if c.tc != nil && c.state == stateOpen {
		c.beginWrite()
		err := c.tc.CloseWrite()
		c.endWrite(0, err)
	}
	c.raw.CloseWrite()
}

// WriteFile implements eventloop.Conn. Records must be sealed in userspace, so
// the range is read (pread, a record's worth at a time, the first into what is
// held back to fill that record) and sealed as bytes: it is sent in order, but
// its sealed bytes are queued in memory like any Write's rather than read as
// the socket drains. The plaintext of a last partial record is held back, as
// WritevMore's: the response's next bytes, or its end, follow.
func (c *Conn) WriteFile(fd int, off, n int64) error {
	if c.state != stateOpen {
		return eventloop.ErrClosed
	}
	seg, err := eventloop.OpenFileSegment(fd, off, n)
	if err != nil {
		return err
	}
	defer seg.Close()
	l := c.layer
	rs := c.recordBytes()
	c.beginWrite()
	var werr error
	for seg.Remaining() > 0 && werr == nil {
		if c.held == nil && seg.Remaining() >= int64(rs) {
			k, err := seg.Read(l.fileBuf[:rs])
			if err != nil {
				return c.abortFileWrite(err)
			}
			_, werr = c.tc.Write(l.fileBuf[:k])
			continue
		}
		if c.held == nil {
			c.hold(nil)
		}
		k, err := seg.Read(c.held[len(c.held):rs])
		if err != nil {
			return c.abortFileWrite(err)
		}
		if c.held = c.held[:len(c.held)+k]; len(c.held) == rs {
			_, werr = c.tc.Write(c.held)
			c.held = c.held[:0]
		}
	}
	if werr != nil || len(c.held) == 0 {
		c.dropHeld()
	}
	_, werr = c.endWrite(0, werr)
	return werr
}

// abortFileWrite ends a WriteFile whose file could not be read: the stream
// cannot go on, so what is held and queued is dropped (a second Close).
func (c *Conn) abortFileWrite(err error) error {
	c.dropHeld()
	c.endWrite(0, nil)
	c.raw.Close()
	c.raw.Close()
	return err
}

// SetSendfile implements eventloop.Conn: a userspace TLS connection always reads
// files (WriteFile), so there is nothing to choose.
func (c *Conn) SetSendfile(bool, int) {}
