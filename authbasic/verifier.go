package authbasic

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

// Runner runs a function on an event loop's thread; *eventloop.Loop is one.
type Runner interface {
	Run(fn func()) error
}

// Job is one password check handed to a Verifier. Its owner sets Hash, Password,
// Loop and Done, and leaves the Job alone until Done has run.
type Job struct {
	Hash     *Hash
	Password []byte // read by a worker until Done runs
	Loop     Runner // Done runs there
	Done     func() // runs on Loop once Match (or Err) is set
	Match    bool
	Err      error // ErrClosed when the verifier stopped before checking
}

var (
	// ErrBusy is Submit's answer when the queue is full: the caller answers 503
	// rather than holding more requests than the workers can check.
	ErrBusy = errors.New("authbasic: password verification queue full")
	// ErrClosed is the answer of a closed Verifier.
	ErrClosed = errors.New("authbasic: verifier closed")
)

// VerifierConfig sizes a Verifier. The zero value is one worker, unpinned.
type VerifierConfig struct {
	CPUs    numa.CPUSet // the domain's CPUs: workers run only there (empty: anywhere)
	Workers int         // default: one per CPU in CPUs, at least one
	Queue   int         // jobs that may wait; default 64 per worker
	Nice    int         // added to the workers' nice value, so the loops sharing their CPUs come first
	Logger  *slog.Logger
}

// Verifier checks slow password hashes (bcrypt, SHA-crypt, MD5-crypt) on its own
// threads, so a login never holds up an event loop: one Verifier per NUMA domain,
// its workers pinned to the domain's CPUs, its results run on the submitting loop.
// The queue is bounded: past it, Submit says ErrBusy at once.
type Verifier struct {
	jobs    chan *Job
	mu      sync.RWMutex // orders Submit against Close
	closed  bool
	wg      sync.WaitGroup
	log     *slog.Logger
	checked atomic.Uint64
	busy    atomic.Uint64
	tidMu   sync.Mutex
	tids    []int
}

// VerifierStats are a Verifier's counters.
type VerifierStats struct {
	Checked uint64 // jobs checked
	Busy    uint64 // jobs refused because the queue was full
	Queued  int    // jobs waiting now
}

// NewVerifier starts the workers; it returns once each has pinned itself, or with
// the error that stopped one.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = max(cfg.CPUs.Count(), 1)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 64 * cfg.Workers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	v := &Verifier{jobs: make(chan *Job, cfg.Queue), log: cfg.Logger}
	errs := make(chan error, cfg.Workers)
	for range cfg.Workers {
		v.wg.Add(1)
		go v.work(cfg, errs)
	}
	var err error
	for range cfg.Workers {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

func (v *Verifier) work(cfg VerifierConfig, started chan<- error) {
	defer v.wg.Done()
	// Never unlocked: the pinned thread ends with the goroutine instead of going
	// back to the scheduler.
	runtime.LockOSThread()
	if !cfg.CPUs.IsEmpty() {
		if err := numa.SetThreadAffinity(0, cfg.CPUs); err != nil {
			started <- fmt.Errorf("verifier: %w", err)
			return
		}
	}
	if cfg.Nice != 0 {
		// The kernel's getpriority returns 20 - nice; x/sys/unix passes that through.
		tid := unix.Gettid()
		cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err == nil {
			err = unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-cur+cfg.Nice, 19))
		}
		if err != nil {
			started <- fmt.Errorf("verifier: nice: %w", err)
			return
		}
	}
	v.tidMu.Lock()
	v.tids = append(v.tids, unix.Gettid())
	v.tidMu.Unlock()
	started <- nil
	for j := range v.jobs {
		v.run(j)
	}
}

func (v *Verifier) run(j *Job) {
	defer func() {
		if r := recover(); r != nil {
			v.log.Error("panic in password verification", "panic", r)
			j.Match = false
		}
		v.checked.Add(1)
		if err := j.Loop.Run(j.Done); err != nil {
			v.log.Debug("verifier: result dropped", "err", err) // the loop is gone
		}
	}()
	j.Match, j.Err = j.Hash.Verify(j.Password), nil
}

// Submit queues j; its Done runs on j.Loop later. It never blocks: a full queue is
// ErrBusy, a closed Verifier ErrClosed, and then Done does not run.
func (v *Verifier) Submit(j *Job) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return ErrClosed
	}
	select {
	case v.jobs <- j:
		return nil
	default:
		v.busy.Add(1)
		return ErrBusy
	}
}

// Close stops the workers once the check they are running ends. Jobs still queued
// are answered with ErrClosed (their Done runs) without being checked.
func (v *Verifier) Close() {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return
	}
	v.closed = true
	v.mu.Unlock()
	// Take the queue back first so that the workers stop after their current job.
	for {
		select {
		case j := <-v.jobs:
			j.Match, j.Err = false, ErrClosed
			_ = j.Loop.Run(j.Done)
			continue
		default:
		}
		break
	}
	close(v.jobs)
	v.wg.Wait()
}

// Tids returns the kernel thread ids of the workers.
func (v *Verifier) Tids() []int {
	v.tidMu.Lock()
	defer v.tidMu.Unlock()
	return append([]int(nil), v.tids...)
}

// Stats returns the counters; safe from any goroutine.
func (v *Verifier) Stats() VerifierStats {
	return VerifierStats{Checked: v.checked.Load(), Busy: v.busy.Load(), Queued: len(v.jobs)}
}
