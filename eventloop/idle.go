package eventloop

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Idle connections (SetIdle) are kept in a list per loop, oldest first, linked
// through the connections themselves: marking one idle or busy is O(1) and
// allocates nothing. Drain closes them all; when the loop needs a connection it
// cannot have (at MaxConns, or accept failing with EMFILE or ENFILE) it closes
// the oldest ones to make room, as nginx drains its reusable connections.
//
// The links are fds (plus one; 0 ends the list), looked up in the fd table, where
// every idle connection is: 8 bytes of an idle connection rather than 16.

// idleList is a loop's idle connections, oldest at head.
type idleList struct {
	head, tail *conn
	n          int
}

// idleLink is how a connection is named in the list: its fd plus one.
func (c *conn) idleLink() int32 { return int32(c.fd) + 1 }

// idleConn is the connection a link names, nil for 0.
func (l *Loop) idleConn(link int32) *conn {
	if link == 0 {
		return nil
	}
	return l.table.conn(int(link) - 1)
}

func (q *idleList) push(c *conn) {
	c.idlePrev, c.idleNext = 0, 0
	if q.tail != nil {
		c.idlePrev = q.tail.idleLink()
		q.tail.idleNext = c.idleLink()
	} else {
		q.head = c
	}
	q.tail = c
	q.n++
}

func (q *idleList) remove(c *conn) {
	l := c.loop
	prev, next := l.idleConn(c.idlePrev), l.idleConn(c.idleNext)
	if prev != nil {
		prev.idleNext = c.idleNext
	} else {
		q.head = next
	}
	if next != nil {
		next.idlePrev = c.idlePrev
	} else {
		q.tail = prev
	}
	c.idlePrev, c.idleNext = 0, 0
	q.n--
}

// setIdle moves c into or out of the list; marking an idle connection idle again
// makes it the newest.
func (c *conn) setIdle(idle bool) {
	q := &c.loop.idle
	if c.idle {
		q.remove(c)
	}
	c.idle = idle
	if idle {
		q.push(c)
	}
}

// maxReuse is how many idle connections one attempt to make room closes at most,
// nginx's ngx_drain_connections: an eighth of the idle ones, at least one, at most 32.
const maxReuse = 32

// reuseIdle closes the oldest idle connections to make room and returns how many
// fds that freed at once (an idle connection still flushing a response closes when
// it is sent, which frees its fd later).
func (l *Loop) reuseIdle() int {
	n := max(min(maxReuse, l.idle.n/8), 1)
	before := l.openConns.Load()
	for ; n > 0 && l.idle.head != nil; n-- {
		l.idle.head.closeGraceful(ErrReused)
	}
	return int(before - l.openConns.Load())
}

// closeIdle closes every idle connection (Drain).
func (l *Loop) closeIdle(err error) {
	for l.idle.head != nil {
		l.idle.head.closeGraceful(err)
	}
}

// limitLogInterval is how often a loop logs that it runs out of connections or
// fds, however often it happens (nginx warns about reusing connections once a
// second).
const limitLogInterval = time.Second

// limitLog rate-limits one kind of shortage message.
type limitLog struct {
	last       time.Time
	suppressed int
}

// limitLog logs msg at level unless it was logged less than limitLogInterval ago; the
// line says how many were left out since the last one.
func (l *Loop) limitLog(ll *limitLog, level slog.Level, msg string, args ...any) {
	now := time.Now()
	if !ll.last.IsZero() && now.Sub(ll.last) < limitLogInterval {
		ll.suppressed++
		return
	}
	if ll.suppressed > 0 {
		msg += fmt.Sprintf(" (%d more times since the last report)", ll.suppressed)
	}
	ll.last, ll.suppressed = now, 0
	l.log.Log(context.Background(), level, msg, args...)
}
