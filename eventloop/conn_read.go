package eventloop

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// read does one read(2) into the loop's scratch buffer per readiness event:
// with level-triggered polling, what is left is reported again next round,
// which keeps one busy connection from starving the others.
func (c *conn) read() {
	l := c.loop
	n, err := rawRead(c.fd, l.scratch)
	switch {
	case err == nil && n > 0:
		c.inMore, c.inUnknown = n == len(l.scratch), false
		c.h.OnData(c, l.scratch[:n])
	case err == nil: // n == 0: the peer finished sending
		c.closeGraceful(io.EOF)
	case err == unix.EAGAIN:
		c.inMore, c.inUnknown = false, false
	case err == unix.EINTR:
	default:
		c.closeNow(fmt.Errorf("read: %w", err))
	}
}
