package eventloop

// BatchEnd runs a function once at the end of the batch of events during which
// it was armed: work that gathers over a batch (access log lines written by the
// requests it finished) is handed on once per batch instead of once per event.
// Embed it in the struct it serves; arming never allocates. Its methods must be
// called on the loop's thread.
type BatchEnd struct {
	fn    func()
	loop  *Loop
	armed bool
}

// InitBatchEnd binds h to the loop and to the function it runs.
func (l *Loop) InitBatchEnd(h *BatchEnd, fn func()) { h.loop, h.fn = l, fn }

// Arm makes h run at the end of the current batch (once, however often it is
// armed). Armed outside a batch (from a task or a timer, which are part of
// one), it runs at the end of that batch too.
func (h *BatchEnd) Arm() {
	if h.armed {
		return
	}
	h.armed = true
	h.loop.batchEnds = append(h.loop.batchEnds, h)
}

// AtExit makes fn run on the loop's thread when it exits, after its connections
// closed and before its pool may go: what lent pool buffers to another thread gets
// them back there. Call it on the loop's thread.
func (l *Loop) AtExit(fn func()) { l.atExit = append(l.atExit, fn) }

// runBatchEnds runs the armed hooks; one armed again by a hook runs at the end of
// the next batch.
func (l *Loop) runBatchEnds() {
	hooks := l.batchEnds
	l.batchEnds = l.batchEndsSpare[:0]
	for i, h := range hooks {
		h.armed = false
		l.safeCallBatchEnd(h)
		hooks[i] = nil
	}
	l.batchEndsSpare = hooks[:0]
}

func (l *Loop) safeCallBatchEnd(h *BatchEnd) {
	defer l.recoverTask("batch end")
	h.fn()
}
