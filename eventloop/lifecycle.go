package eventloop

import "time"

// Drain stops accepting (the loop's listeners are closed), closes idle
// connections (SetIdle) at once and the others as they become idle, lets busy
// ones finish, and force-closes
// whatever is left at deadline. The loop exits when its last connection is
// gone; wait on Done. Safe from any goroutine.
func (l *Loop) Drain(deadline time.Time) error {
	return l.Run(func() { l.drain(deadline) })
}

// Stop closes every listener and connection now and exits the loop; wait on
// Done. A loop that was never started is released at once. Safe from any
// goroutine.
func (l *Loop) Stop() error {
	if l.state.CompareAndSwap(stateNew, stateExited) {
		l.shutdown()
		return nil
	}
	return l.Run(func() {
		for _, ln := range l.listeners {
			l.closeListener(ln)
		}
		l.closeAll(ErrStopped)
		l.exit = true
	})
}

func (l *Loop) drain(deadline time.Time) {
	if l.state.Load() != stateRunning {
		return
	}
	l.state.Store(stateDraining)
	for _, ln := range l.listeners {
		l.closeListener(ln)
	}
	l.closeIdle(ErrDraining)
	l.drainTimer.Reset(time.Until(deadline))
	l.checkDrained()
}

// draining reports whether Drain has begun on this loop.
func (l *Loop) draining() bool { return l.state.Load() == stateDraining }

// Draining reports whether Drain has begun on this loop: handlers use it to answer
// with "Connection: close" so keep-alive clients move to another process.
func (l *Loop) Draining() bool { return l.draining() }

// checkDrained ends a draining loop once no connection is left.
func (l *Loop) checkDrained() {
	if l.draining() && l.openConns.Load() == 0 {
		l.drainTimer.Stop()
		l.exit = true
	}
}

// closeAll closes every connection now, dropping queued output.
func (l *Loop) closeAll(err error) {
	l.eachConn(func(c *conn) { c.closeNow(err) })
}

func (l *Loop) eachConn(fn func(c *conn)) {
	l.table.each(slotConn, func(s *slot) { fn(s.conn()) })
}

// closeFailed closes the connections whose write failed during the last
// callback; Write itself only records the failure so that OnClose never runs
// inside the handler's own Write call.
func (l *Loop) closeFailed() {
	for len(l.failed) > 0 {
		c := l.failed[len(l.failed)-1]
		l.failed[len(l.failed)-1] = nil
		l.failed = l.failed[:len(l.failed)-1]
		c.closeNow(c.failErr)
	}
}
