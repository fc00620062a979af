package eventloop

// Idle connections (SetIdle) are kept in a list per loop, oldest first, linked
// through the connections themselves: marking one idle or busy is O(1) and
// allocates nothing. Drain closes them all at once.

// idleList is a loop's idle connections, oldest at head.
type idleList struct {
	head, tail *conn
	n          int
}

func (q *idleList) push(c *conn) {
	c.idlePrev, c.idleNext = q.tail, nil
	if q.tail != nil {
		q.tail.idleNext = c
	} else {
		q.head = c
	}
	q.tail = c
	q.n++
}

func (q *idleList) remove(c *conn) {
	if c.idlePrev != nil {
		c.idlePrev.idleNext = c.idleNext
	} else {
		q.head = c.idleNext
	}
	if c.idleNext != nil {
		c.idleNext.idlePrev = c.idlePrev
	} else {
		q.tail = c.idlePrev
	}
	c.idlePrev, c.idleNext = nil, nil
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

// closeIdle closes every idle connection (Drain).
func (l *Loop) closeIdle(err error) {
	for l.idle.head != nil {
		l.idle.head.closeGraceful(err)
	}
}
