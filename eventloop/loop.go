package eventloop

import (
	"errors"
	"fmt"
	"github.com/numaproxy/numaproxy/internal/freelist"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

// loop states, in the order a loop goes through them.
const (
	stateNew int32 = iota
	stateRunning
	stateDraining
	stateExited
)

// Loop is one event loop: a goroutine locked to an OS thread pinned to one
// CPU, polling its listeners, connections and timers.
type Loop struct {
	cfg     Config
	log     *slog.Logger
	handler Handler
	pool    BufferPool

	taskFd  int      // eventfd: written when tasks are queued, in the epoll set
	tasks   []func() // queued by Run, under mu
	running []func() // the batch being run (reused)
	taskBuf [8]byte
	epfd    int
	events  [batchSize]unix.EpollEvent
	// next and batchN: the batch's next event and its length (dispatch);
	// eventKind what the event being handled is for.
	next, batchN int
	eventKind    slotKind
	modEvent     unix.EpollEvent
	table        fdTable

	base     time.Time
	wall     time.Time // when the current batch started (tick)
	clock    int64     // the same on the loop clock: ns since base
	timers   timerHeap
	timerSeq uint32
	// firing: runTimers is firing the timers due at firingNow.
	firing    bool
	firingNow int64
	// lastYield is when the loop last gave the scheduler a turn (HoldP, yield);
	// yields counts those turns.
	lastYield int64
	yields    uint64
	tfd       int
	tfdArmed  int64
	tfdSpec   unix.ItimerSpec
	tfdBuf    [8]byte

	scratch []byte
	iov     [][]byte // writev scratch, at most maxIovecs entries
	iovecs  [maxIovecs]unix.Iovec
	// chunkLists are empty output queue lists of closed connections (queue).
	chunkLists [][]chunk

	listeners []*Listener
	failed    []*conn // connections whose write failed, closed after the callback
	// corked are the connections WritevCorked left bytes in during this callback;
	// writeMore: rawWritev sends with MSG_MORE (moreSent: it did).
	corked              []*conn
	writeMore, moreSent bool
	// freeConns are closed connections for newConn to reuse; those Release gives
	// back during a batch join them when it ends, when no callback that may still
	// look at them is on the stack (and a Dial inside one must not get them).
	freeConns   freelist.List[conn]
	acceptPause int      // listeners currently not polled after EMFILE & co
	idle        idleList // SetIdle connections, oldest first
	connLog     limitLog // worker_connections are not enough
	acceptLog   limitLog // accept failed (EMFILE & co)
	drainTimer  Timer
	exit        bool
	// batchEnds are the BatchEnd hooks armed during the current batch.
	batchEnds, batchEndsSpare []*BatchEnd
	atExit                    []func()

	state atomic.Int32
	tid   atomic.Int32
	mu    sync.RWMutex // orders Run against closing the Poller
	shut  bool
	done  chan struct{}

	openConns   atomic.Int64
	accepted    atomic.Uint64
	closed      atomic.Uint64
	staleEvents atomic.Uint64
	panics      atomic.Uint64
	acceptStops atomic.Uint64
	acceptErrs  atomic.Uint64
}

// New prepares a loop: its Poller, epoll set and timerfd. Listeners may be
// added before Start.
func New(cfg Config) (*Loop, error) {
	cfg.setDefaults()
	l := &Loop{
		cfg: cfg, log: cfg.Logger.With("cpu", cfg.CPU), handler: cfg.Handler, pool: cfg.Pool,
		epfd: -1, tfd: -1, base: time.Now(), done: make(chan struct{}),
		iov: make([][]byte, 0, maxIovecs),
	}
	// The read buffer comes from the pool too, so a node-bound pool places
	// the hottest buffer of the loop on the loop's node; it goes back at exit.
	l.scratch = l.pool.Get(cfg.ReadBufferSize)
	l.taskFd = -1
	err := l.openEpoll()
	if err == nil {
		err = l.openTimerfd()
	}
	if err == nil {
		err = l.openTaskFd()
	}
	if err == nil {
		err = l.epollAdd(l.tfd, l.table.register(l.tfd, slotTimerfd, nil), unix.EPOLLIN)
	}
	if err != nil {
		l.closeFds()
		l.pool.Put(l.scratch)
		return nil, fmt.Errorf("loop cpu %d: %w", cfg.CPU, err)
	}
	l.InitTimer(&l.drainTimer, func(*Timer) { l.closeAll(ErrDrainTimeout) })
	return l, nil
}

// Start runs the loop on a new goroutine locked to its OS thread and pinned
// to Config.CPU, runs Config.OnStart there, and returns once polling begins
// or with the error that prevented it.
func (l *Loop) Start() error {
	if !l.state.CompareAndSwap(stateNew, stateRunning) {
		return errors.New("eventloop: loop already started")
	}
	ready := make(chan error, 1)
	go l.run(ready)
	return <-ready
}

func (l *Loop) run(ready chan<- error) {
	// Never unlocked: when this goroutine returns, the runtime ends the thread
	// instead of handing a pinned thread with a NUMA policy to other goroutines.
	// Pin only after locking: the runtime then starts any new thread from its
	// template thread, so no ordinary thread inherits this CPU mask.
	runtime.LockOSThread()
	defer l.shutdown()
	l.tid.Store(int32(unix.Gettid()))
	if l.cfg.CPU >= 0 {
		if err := numa.PinThread(l.cfg.CPU); err != nil {
			ready <- fmt.Errorf("loop cpu %d: %w", l.cfg.CPU, err)
			return
		}
	}
	l.tick()
	if l.cfg.OnStart != nil {
		if err := l.cfg.OnStart(l); err != nil {
			ready <- fmt.Errorf("loop cpu %d: start hook: %w", l.cfg.CPU, err)
			return
		}
	}
	if l.cfg.HoldP {
		holdP()
		defer releaseP()
	}
	ready <- nil
	for !l.exit {
		l.pollBatch()
		if len(l.batchEnds) > 0 {
			l.runBatchEnds()
			l.endCallback()
		}
		if l.freeConns.Released() {
			l.freeConns.Reuse()
		}
	}
}

// shutdown closes whatever is left once polling ended, then every fd.
func (l *Loop) shutdown() {
	for _, ln := range l.listeners {
		l.closeListener(ln)
	}
	l.closeAll(ErrStopped)
	l.closeWatches()
	l.runBatchEnds() // what the closes armed (log lines of the requests they ended)
	for _, fn := range l.atExit {
		l.safeCall(fn)
	}
	l.state.Store(stateExited)
	l.pool.Put(l.scratch)
	l.scratch = nil
	l.mu.Lock()
	l.shut = true
	l.closeFds()
	l.mu.Unlock()
	close(l.done)
}

func (l *Loop) closeFds() {
	if l.tfd >= 0 {
		_ = unix.Close(l.tfd)
	}
	if l.epfd >= 0 {
		_ = unix.Close(l.epfd)
	}
	if l.taskFd >= 0 {
		_ = unix.Close(l.taskFd)
	}
}

// Run queues fn to run on the loop's thread; it is the only way other
// goroutines touch a loop. Tasks still queued when the loop exits are dropped.
func (l *Loop) Run(fn func()) error {
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		return ErrLoopClosed
	}
	wake := len(l.tasks) == 0
	l.tasks = append(l.tasks, fn)
	l.mu.Unlock()
	if wake {
		// One write per batch of tasks: the loop reads the eventfd, then takes the lot.
		one := [8]byte{1}
		if _, err := unix.Write(l.taskFd, one[:]); err != nil && err != unix.EAGAIN {
			return fmt.Errorf("loop cpu %d: queue task: %w", l.cfg.CPU, err)
		}
	}
	return nil
}

// runTasks runs what Run queued.
func (l *Loop) runTasks() {
	_, _ = rawRead(l.taskFd, l.taskBuf[:])
	l.mu.Lock()
	l.running, l.tasks = l.tasks, l.running[:0]
	l.mu.Unlock()
	for i, fn := range l.running {
		l.safeCall(fn)
		l.endCallback()
		l.running[i] = nil
	}
}

func (l *Loop) safeCall(fn func()) {
	defer l.recoverTask("task")
	fn()
}

// recoverTask logs a panic of a task or timer callback; the loop keeps running.
func (l *Loop) recoverTask(what string) {
	if r := recover(); r != nil {
		l.panics.Add(1)
		l.log.Error("panic in "+what, "panic", r, "stack", string(debug.Stack()))
	}
}

// Done is closed once the loop has exited and closed all its fds.
func (l *Loop) Done() <-chan struct{} { return l.done }

// CPU returns the CPU the loop is pinned to (-1 if unpinned).
func (l *Loop) CPU() int { return l.cfg.CPU }

// Tid returns the loop thread's kernel thread id (0 before Start).
func (l *Loop) Tid() int { return int(l.tid.Load()) }

// Pool returns the pool the loop's connections borrow buffers from.
func (l *Loop) Pool() BufferPool { return l.pool }

// Logger returns the loop's logger.
func (l *Loop) Logger() *slog.Logger { return l.log }

// Stats are a loop's counters; reading them takes no lock.
type Stats struct {
	Conns       int64  // connections open now
	Accepted    uint64 // connections accepted
	Closed      uint64 // connections closed (accepted or dialed)
	StaleEvents uint64 // epoll events dropped because their fd generation was gone
	Panics      uint64 // handler, task and timer panics recovered
	AcceptStops uint64 // times a listener stopped being polled after accept failed
	AcceptErrs  uint64 // accept4 calls that failed with anything but EAGAIN
}

// Stats returns the loop's counters; safe from any goroutine.
func (l *Loop) Stats() Stats {
	acc, cl := l.accepted.Load(), l.closed.Load()
	return Stats{
		Conns: int64(l.openConns.Load()), Accepted: acc, Closed: cl,
		StaleEvents: l.staleEvents.Load(), Panics: l.panics.Load(), AcceptStops: l.acceptStops.Load(),
		AcceptErrs: l.acceptErrs.Load(),
	}
}
