package eventloop

import (
	"time"

	"golang.org/x/sys/unix"
)

// Timers wake the loop through a timerfd registered in the loop's epoll set (the
// wait itself has no deadline but maxWait). It is re-armed only when the
// earliest deadline moves before the armed one: pushing a deadline later (the
// common case for idle timeouts) costs no syscall.

func (l *Loop) openTimerfd() error {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return err
	}
	l.tfd = fd
	return nil
}

// now is the loop clock: monotonic nanoseconds since the loop was created, as of
// the start of the current batch.
func (l *Loop) now() int64 { return l.clock }

// tick reads the clock, once per batch: as nginx's cached time, a deadline set
// during a batch counts from its start (early by at most the batch's own run
// time), and the requests of a batch share one time. Per event, the clock reads
// (16 a request on keep-alive, through timers and the proxy's try times) cost
// as much as a twentieth of the loop's user time.
func (l *Loop) tick() {
	l.wall = time.Now()
	l.clock = int64(l.wall.Sub(l.base))
}

// Now is the time the current batch of events started (the loop's cached time,
// read once per batch). Call it on the loop's thread.
func (l *Loop) Now() time.Time { return l.wall }

// Clock is Now as the loop's monotonic clock, for durations measured on the loop
// (a subtraction, where Time.Sub weighs wall and monotonic readings).
func (l *Loop) Clock() time.Duration { return time.Duration(l.clock) }

// armTimerfd makes the timerfd fire no later than the earliest deadline.
func (l *Loop) armTimerfd() {
	if len(l.timers.h) == 0 || l.tfd < 0 {
		return
	}
	when := l.timers.h[0].when
	if l.tfdArmed != 0 && l.tfdArmed <= when {
		return
	}
	d := max(when-l.now(), 1) // 0 would disarm
	l.tfdSpec.Value = unix.NsecToTimespec(d)
	if err := unix.TimerfdSettime(l.tfd, 0, &l.tfdSpec, nil); err != nil {
		l.log.Error("timerfd_settime", "err", err)
		return
	}
	l.tfdArmed = when
}

// onTimerfd runs the due timers after the timerfd fired.
func (l *Loop) onTimerfd() {
	_, _ = rawRead(l.tfd, l.tfdBuf[:]) // consume the expiration count
	l.tfdArmed = 0
	l.runTimers()
}

// runTimers fires due timers in deadline order. A timer re-armed by a
// callback during this pass waits for the next pass, so a callback that
// re-arms with 0 cannot spin the loop.
func (l *Loop) runTimers() {
	now := l.now()
	l.firing, l.firingNow = true, now
	for {
		t, ok := l.timers.pop(now)
		if !ok {
			break
		}
		if t != nil {
			l.fireTimer(t)
		}
	}
	l.firing = false
	l.armTimerfd()
}

func (l *Loop) fireTimer(t *Timer) {
	defer l.recoverTask("timer")
	t.fn(t)
}
