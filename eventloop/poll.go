package eventloop

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loop waits in epoll_wait on its own epoll set, whose events carry (fd,
// generation) so that an event for a closed fd reused within one batch is told
// from the new socket's. Tasks from other goroutines arrive through an eventfd in
// the same set.
//
// With Config.HoldP the wait is a raw system call: the Go scheduler does not see
// the locked thread leave, so the loop keeps its P and wakes without the hand-off
// through futexes that a blocking system call costs a locked thread (perf showed a
// sixth of the process's time in that hand-off with a new connection per request;
// context switches per request fell from 2.3 to 0.7). The runtime still stops the
// loop when it must: preemption signals interrupt the wait (EINTR), and the wait is
// bounded (maxWait) in case signals are off. The price: a waiting loop holds a P, so
// GOMAXPROCS must exceed the number of such loops (numa.GOMAXPROCS). Without HoldP
// the wait is an ordinary blocking system call.
// The first version sat inside gnet's netpoll.Poller, which waits with an ordinary
// system call and, after every batch, calls runtime.Gosched.

// holdingLoops counts the running HoldP loops of the process: each keeps a P, so
// GOMAXPROCS is the number of them plus one, the one P the garbage collector's
// workers, runtime timers, signal delivery and ordinary goroutines (reload, logs)
// share. This is the one place GOMAXPROCS is set: while a rollover runs old and new
// loops side by side, it counts both.
var holdingLoops atomic.Int32

// reservedP counts the Ps ReserveP added.
var reservedP atomic.Int32

// holdP registers a running HoldP loop and makes room for it.
func holdP() { runtime.GOMAXPROCS(int(holdingLoops.Add(1)+reservedP.Load()) + 1) }

// releaseP unregisters a HoldP loop that stopped; the last one leaves GOMAXPROCS
// as it is.
func releaseP() {
	if n := int(holdingLoops.Add(-1)); n > 0 {
		runtime.GOMAXPROCS(n + int(reservedP.Load()) + 1)
	}
}

// ReserveP adds a P to those of the HoldP loops, for a thread that waits in
// short system calls all the time (the access log's writers poll so, every
// millisecond). sysmon takes the P of a thread in a system call away unless a P
// is idle, and then keeps waking every 20 µs: with the one spare P taken by such
// a thread, that was a fifth of the process's CPU. Without HoldP loops running
// (tests), GOMAXPROCS is left as it is until one starts: see ReservedP.
func ReserveP() {
	r := reservedP.Add(1)
	if n := holdingLoops.Load(); n > 0 {
		runtime.GOMAXPROCS(int(n+r) + 1)
	}
}

// ReservedP reports whether the Ps ReserveP asked for are there (HoldP loops
// run), so that a thread that reserved one may hold it.
func ReservedP() bool { return reservedP.Load() > 0 && holdingLoops.Load() > 0 }

// maxWait bounds one epoll_wait, so that a stop-the-world never waits on the loop
// longer than this even with asynchronous preemption disabled.
const maxWait = 50 // ms

const batchSize = 256

// yieldEvery is how often a HoldP loop gives the scheduler a turn, when it has
// nothing to do. The runtime sees a goroutine that never parks as one that runs
// for ever, and sysmon preempts one that held its P for 10 ms (a signal, then,
// for a locked thread, a hand-off of the P through another thread and back):
// mid-batch, with the requests of the batch waiting on it, and with the other
// thread maybe waiting for a CPU. Yielding at a quiet moment first, somewhat
// more often, moves that hand-off to where nothing waits for it.
const yieldEvery = 6 * time.Millisecond

// yield lets the scheduler run (runtime.Gosched) between batches; sysmon sees
// the loop's P change hands and does not preempt it for the next 10 ms.
func (l *Loop) yield(now int64) {
	l.lastYield = now
	l.yields++
	runtime.Gosched()
}

func (l *Loop) openEpoll() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	l.epfd = fd
	return nil
}

// epollData packs (fd, gen) into the event's 64-bit data word (Fd and Pad).
func epollEvent(fd int, gen uint32, events uint32) unix.EpollEvent {
	return unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(gen)}
}

func (l *Loop) epollAdd(fd int, gen uint32, events uint32) error {
	l.modEvent = epollEvent(fd, gen, events)
	if err := rawEpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &l.modEvent); err != nil {
		return fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

func (l *Loop) epollMod(fd int, gen uint32, events uint32) error {
	l.modEvent = epollEvent(fd, gen, events)
	if err := rawEpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &l.modEvent); err != nil {
		return fmt.Errorf("epoll_ctl mod fd %d: %w", fd, err)
	}
	return nil
}

func (l *Loop) epollDel(fd int) {
	_ = rawEpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// openTaskFd makes the eventfd that wakes the loop for tasks.
func (l *Loop) openTaskFd() error {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	l.taskFd = fd
	return l.epollAdd(fd, l.table.register(fd, slotTasks, nil), unix.EPOLLIN)
}

// pollBatch waits for, then handles, one batch of ready events.
func (l *Loop) pollBatch() {
	var n int
	var err error
	if l.cfg.HoldP {
		wait := maxWait
		now := l.now()
		if now-l.lastYield >= int64(yieldEvery) {
			wait = 0 // a look first: the loop yields only if nothing waits
		}
		for {
			r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
				uintptr(len(l.events)), uintptr(wait), 0, 0)
			n = int(r)
			if errno != 0 {
				err = errno
			}
			if wait != 0 || n != 0 || err != nil {
				break
			}
			l.yield(now)
			wait = maxWait
		}
	} else {
		n, err = unix.EpollWait(l.epfd, l.events[:], -1)
	}
	l.tick()
	if err != nil {
		if err != unix.EINTR {
			l.log.Error("epoll_wait", "err", err)
		}
		return
	}
	for l.next, l.batchN = 0, n; l.next < n; {
		l.dispatch()
	}
}

// dispatch handles the batch's events from l.next on. A panic of a connection's
// handler closes that connection, and its caller goes on with the next event: one
// deferred recover for the batch (a panic starts another), not one an event.
func (l *Loop) dispatch() {
	defer l.recoverEvent()
	for i, n := l.next, l.batchN; i < n; i++ {
		l.next = i + 1
		ev := &l.events[i]
		s := l.table.lookup(int(ev.Fd), uint32(ev.Pad))
		if s == nil {
			l.staleEvents.Add(1)
			continue
		}
		l.eventKind = s.kind
		switch s.kind {
		case slotConn:
			l.handleEvent(s.conn(), ev.Events)
		case slotListener:
			l.acceptEvent(s.ln())
		case slotTimerfd:
			l.onTimerfd()
		case slotTasks:
			l.runTasks()
		case slotWatch:
			l.watchEvent(s.watch())
		}
		l.eventKind = slotFree
		l.endCallback()
	}
}

// recoverEvent contains the panic of the connection whose event dispatch was
// handling: that connection closes, as its event ends. Any other panic goes on
// (the event kinds that can have one contain it themselves).
func (l *Loop) recoverEvent() {
	if l.eventKind != slotConn {
		return
	}
	l.eventKind = slotFree
	r := recover()
	if r == nil {
		return
	}
	ev := &l.events[l.next-1]
	if s := l.table.lookup(int(ev.Fd), uint32(ev.Pad)); s != nil && s.kind == slotConn {
		l.connPanic(s.conn(), r)
	} else {
		// The handler had closed its connection before the panic.
		l.panics.Add(1)
		l.log.Error("panic in connection handler; the connection was closed",
			"panic", r, "fd", ev.Fd, "stack", string(debug.Stack()))
	}
	l.endCallback()
}
