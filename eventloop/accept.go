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
func (l *Loop) acceptEvent(ln *Listener) {
	waiting := true
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
		_ = rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
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
	}
}

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
