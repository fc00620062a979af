package eventloop

import (
	"fmt"
	"log/slog"

	"github.com/numaproxy/numaproxy/errorlog"
	"golang.org/x/sys/unix"
)

// acceptEvent accepts until the queue is empty. Errors never stop the loop:
// transient per-connection ones are skipped. When the loop is at MaxConns or
// accept fails for lack of fds (EMFILE, ENFILE), the oldest idle connections
// are closed to make room and accepting goes on; with no idle connection to
// close, or on any other failure (ENOBUFS, ENOMEM, something unexpected), the
// listener is not polled until a connection of this loop closes or AcceptRetry
// passes, whichever comes first.
//
// Only the event itself says a connection is waiting: once one was taken, at the
// bound or out of fds, the loop returns and lets the (level-triggered) listener
// report again rather than close idle connections for nothing.
//
// On a deferred listener each accepted connection is also read (and its request
// served) in the batch, so at most maxAcceptReads are taken per event: a flood
// of new connections with their requests would otherwise hold the loop in one
// callback, its other connections and timers unserved, for as long as it lasts.
func (l *Loop) acceptEvent(ln *Listener) {
	waiting := true
	reads := 0
	for !ln.closed && !ln.paused {
		if max := l.cfg.MaxConns; max > 0 && !ln.last && l.openConns.Load() >= int64(max) {
			if !waiting {
				return
			}
			if !l.makeRoom() {
				// What is left waits in the accept queue (another loop may take it).
				l.pauseAccept(ln)
				return
			}
		}
		fd, remote, err := accept4(ln.fd)
		if err != nil {
			if err != unix.EAGAIN {
				l.acceptErrs.Add(1)
			}
			switch err {
			case unix.EAGAIN:
				return
			case unix.EINTR, unix.ECONNABORTED, unix.EPROTO, unix.EPERM,
				unix.ENETDOWN, unix.ENOPROTOOPT, unix.EHOSTDOWN, unix.ENONET,
				unix.EHOSTUNREACH, unix.EOPNOTSUPP, unix.ENETUNREACH, unix.ETIMEDOUT:
				// accept(2): network errors of one pending connection; try the next.
				waiting = false
				continue
			case unix.EMFILE, unix.ENFILE:
				// Out of fds: unlike nginx, which stops accepting until a connection
				// closes, the oldest idle connections make room and accept is retried.
				// (accept4 takes the fd before it looks at the queue.)
				if !waiting {
					return
				}
				if l.reuseIdle() > 0 {
					l.limitLog(&l.acceptLog, errorlog.LevelCrit, "accept4() failed "+errorlog.Errno(err)+", reusing connections",
						"listen", ln.addr.String())
					continue
				}
				l.limitLog(&l.acceptLog, errorlog.LevelCrit, "accept4() failed "+errorlog.Errno(err)+
					", no idle connection to close: accepting waits until a connection closes", "listen", ln.addr.String())
			default: // ENOBUFS, ENOMEM, or something unexpected
				l.limitLog(&l.acceptLog, errorlog.LevelAlert, "accept4() failed "+errorlog.Errno(err)+
					", accepting waits until a connection closes", "listen", ln.addr.String())
			}
			l.pauseAccept(ln)
			return
		}
		waiting = false
		l.accepted.Add(1)
		ln.acceptedNoDelay(fd)
		c := l.newConn(fd, l.handler)
		c.remote = packAddr(remote)
		if !ln.addr.Addr().IsUnspecified() {
			// Bound to one address: that is the local address, no getsockname needed.
			c.local, c.localLoaded = packAddr(ln.addr), true
		}
		if err := l.registerConn(c, connOpen); err != nil {
			l.log.Error("register accepted connection", "err", err)
			_ = unix.Close(fd)
			continue
		}
		l.callOpen(c)
		if ln.deferred.Load() && c.state == connOpen && !c.paused {
			// Accepted once data came (listen … deferred): read it now rather than
			// after another round of epoll_wait, as nginx does (rev->ready). Without
			// TCP_DEFER_ACCEPT the request is rarely there yet (3% of reads right
			// after accept found it, with a new connection per request): no early read.
			l.connEvent(c, unix.EPOLLIN)
			if reads++; reads == maxAcceptReads {
				return // the listener, level-triggered, reports the rest again
			}
		}
	}
}

// maxAcceptReads bounds the connections a deferred listener's event accepts and
// reads (nginx accepts one per event unless multi_accept is on).
const maxAcceptReads = 32

// makeRoom runs at MaxConns before an accept: like nginx's worker_connections, it
// closes the oldest idle connections and reports whether that freed a connection.
// nginx starts closing them when less than a sixteenth of its connections are free,
// because closing one may take a lingering close; here an idle connection closes
// at once unless it still flushes a response, so room is made only when needed.
func (l *Loop) makeRoom() bool {
	max := l.cfg.MaxConns
	if l.idle.n > 0 {
		l.reuseIdle()
		l.limitLog(&l.connLog, slog.LevelWarn, fmt.Sprintf("%d worker_connections are not enough, reusing connections", max))
		return l.openConns.Load() < int64(max)
	}
	l.limitLog(&l.connLog, errorlog.LevelAlert, fmt.Sprintf("%d worker_connections are not enough", max)+
		", no idle connection to close: accepting waits until a connection closes")
	return false
}

func (l *Loop) pauseAccept(ln *Listener) {
	if err := l.epollMod(ln.fd, ln.gen, 0); err != nil {
		l.log.Error("stop polling listener", "addr", ln.addr, "err", err)
	}
	ln.paused = true
	l.acceptPause++
	l.acceptStops.Add(1)
	ln.retry.Reset(l.cfg.AcceptRetry)
}

func (l *Loop) resumeAccept(ln *Listener) {
	if !ln.paused || ln.closed {
		return
	}
	ln.paused = false
	l.acceptPause--
	ln.retry.Stop()
	if err := l.epollMod(ln.fd, ln.gen, unix.EPOLLIN); err != nil {
		l.log.Error("resume polling listener", "addr", ln.addr, "err", err)
	}
}

// resumeAllAccept runs when a connection closed: an fd is free again.
func (l *Loop) resumeAllAccept() {
	if l.acceptPause == 0 {
		return
	}
	for _, ln := range l.listeners {
		l.resumeAccept(ln)
	}
}

// noDelayWay is how a listener's accepted connections get TCP_NODELAY.
type noDelayWay uint8

const (
	noDelayUnchecked noDelayWay = iota // set on the listener; the next accept checks the child has it
	noDelayInherited                   // accepted sockets inherit it from the listener
	noDelayEach                        // set on every accepted socket
)

// acceptedNoDelay gives an accepted socket TCP_NODELAY. Linux copies it from the
// listening socket to the ones it accepts (as SO_KEEPALIVE and the buffer sizes of
// listen's options), so it is set once on the listener (addListener), not once per
// connection (a setsockopt of the 8 system calls a proxied request on a new
// connection took); the first accepted socket shows whether the kernel copies it,
// else it is set on each.
func (ln *Listener) acceptedNoDelay(fd int) {
	switch ln.noDelay {
	case noDelayInherited:
		return
	case noDelayUnchecked:
		if v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY); err == nil && v != 0 {
			ln.noDelay = noDelayInherited
			return
		}
		ln.noDelay = noDelayEach
	}
	_ = rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
}
