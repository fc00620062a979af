package eventloop

import (
	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// acceptEvent accepts until the queue is empty. Errors never stop the loop:
// transient per-connection ones are skipped; running out of fds or memory
// (or anything unexpected) stops polling the listener until a connection of
// this loop closes or AcceptRetry passes, whichever comes first.
func (l *Loop) acceptEvent(ln *Listener) {
	for !ln.closed && !ln.paused {
		if max := l.cfg.MaxConns; max > 0 && !ln.last && l.openConns.Load() >= int64(max) {
			// Like nginx's "worker_connections are not enough": leave the rest in
			// the accept queue (another loop may take them) until a connection closes.
			l.pauseAccept(ln, ErrTooManyConns)
			return
		}
		fd, remote, err := accept4(ln.fd)
		if err != nil {
			switch err {
			case unix.EAGAIN:
				ln.logged = false // caught up: the failure burst, if any, is over
				return
			case unix.EINTR, unix.ECONNABORTED, unix.EPROTO, unix.EPERM,
				unix.ENETDOWN, unix.ENOPROTOOPT, unix.EHOSTDOWN, unix.ENONET,
				unix.EHOSTUNREACH, unix.EOPNOTSUPP, unix.ENETUNREACH, unix.ETIMEDOUT:
				// accept(2): network errors of one pending connection; try the next.
				continue
			default: // EMFILE, ENFILE, ENOBUFS, ENOMEM, or something unexpected
				l.pauseAccept(ln, err)
				return
			}
		}
		l.accepted.Add(1)
		_ = socket.SetNoDelay(fd, 1)
		c := l.newConn(fd, l.handler)
		c.remote = remote
		if !ln.addr.Addr().IsUnspecified() {
			// Bound to one address: that is the local address, no getsockname needed.
			c.local, c.localLoaded = ln.addr, true
		}
		if err := l.registerConn(c, connOpen); err != nil {
			l.log.Error("register accepted connection", "err", err)
			_ = unix.Close(fd)
			continue
		}
		l.callOpen(c)
	}
}

func (l *Loop) pauseAccept(ln *Listener, err error) {
	if err := l.epollMod(ln.fd, ln.gen, 0); err != nil {
		l.log.Error("stop polling listener", "addr", ln.addr, "err", err)
	}
	ln.paused = true
	l.acceptPause++
	l.acceptStops.Add(1)
	ln.retry.Reset(l.cfg.AcceptRetry)
	if !ln.logged {
		ln.logged = true
		l.log.Warn("accept failed; listener paused until a connection closes or the retry delay passes",
			"addr", ln.addr, "err", err, "retry", l.cfg.AcceptRetry)
	}
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
