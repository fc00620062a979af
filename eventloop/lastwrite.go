package eventloop

import (
	"slices"

	"golang.org/x/sys/unix"
)

// The last write before a close goes out in one packet with the FIN. A response
// written with writev and then closed is two packets (data, then the FIN from
// close(2)), and on loopback the sender's system call also pays for the peer's
// receive side of each, and for its ACK. Written with MSG_MORE, the data stays in
// the socket's queue, and the FIN that close(2) or shutdown(2) sends rides on it
// (tcp_send_fin tacks it onto an unsent segment): 10 segments per proxied request
// with a new connection instead of 12.

// Corker is implemented by the loop's own TCP connections (not by layers that
// wrap them).
type Corker interface {
	// WritevCorked is Writev for the last bytes before a Close in the same
	// callback, to a peer that sends nothing more (it asked for the close): they
	// wait in the socket (MSG_MORE) and Close sends them with the FIN
	// (shutdown(2), then close(2)); if the connection is still open when the
	// callback returns, they are sent then (one setsockopt). Either way before
	// any reset that input arriving unread causes.
	WritevCorked(bufs [][]byte) (int, error)
}

var _ Corker = (*conn)(nil)

// WritevCorked implements Corker.
func (c *conn) WritevCorked(bufs [][]byte) (int, error) {
	l := c.loop
	l.writeMore, l.moreSent = true, false
	n, err := c.Writev(bufs)
	l.writeMore = false
	if l.moreSent && !slices.Contains(l.corked, c) {
		l.corked = append(l.corked, c)
	}
	return n, err
}

// uncork sends what WritevCorked left in the socket: clearing TCP_CORK pushes
// the pending segments (with Nagle's algorithm if TCP_NODELAY is off, as a plain
// write would).
func (c *conn) uncork() {
	_ = rawSetsockoptInt(c.fd, unix.IPPROTO_TCP, unix.TCP_CORK, 0)
}

// pushCorked sends what WritevCorked left for a close that did not come.
func (l *Loop) pushCorked() {
	for i, c := range l.corked {
		l.corked[i] = nil
		if c.state != connClosed && !(c.shutWr && c.q.size == 0) { // shutdown(2) sent them
			c.uncork()
		}
	}
	l.corked = l.corked[:0]
}

// uncorkForClose runs before c's socket is closed: bytes WritevCorked left in it
// are sent with the FIN by shutdown(2) first. close(2) alone would send them so
// only if no input came since the last read: input that arrives in between
// (InputReady is known only as of that read) makes close(2) reset the connection
// and drop them unsent, where a plain write's bytes would have gone out before the
// reset (a request pipelined behind "Connection: close" lost its predecessor's
// answer so, 77 times in 900).
func (l *Loop) uncorkForClose(c *conn) {
	i := slices.Index(l.corked, c)
	if i < 0 {
		return
	}
	l.corked = slices.Delete(l.corked, i, i+1)
	// Even after CloseWrite: closeNow has dropped the queue by now, so whether its
	// shutdown(2) was made is not known here; a second one does no harm.
	_ = rawShutdownWrite(c.fd)
}

// endCallback settles what a callback left: connections whose write failed are
// closed, bytes WritevCorked held for a close that did not come are sent.
func (l *Loop) endCallback() {
	l.closeFailed()
	if len(l.corked) > 0 {
		l.pushCorked()
	}
}
