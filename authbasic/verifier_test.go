package authbasic

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
)

// runDelay is how long the calling thread has waited for a CPU, runnable but not
// running, since it started (the second field of its schedstat). It may run on
// the loop: a failure to read it is an error, not fatal.
func runDelay(t *testing.T) time.Duration {
	data, err := os.ReadFile("/proc/thread-self/schedstat")
	f := strings.Fields(string(data))
	if err != nil || len(f) < 2 {
		t.Errorf("schedstat %q: %v", data, err)
		return 0
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Errorf("schedstat %q: %v", data, err)
	}
	return time.Duration(ns)
}

// tick arms a 10ms timer on the loop, again and again, and records how late each
// firing was, until stop is closed. A firing's lateness leaves out the time the
// loop's thread waited for a CPU meanwhile (other processes of a loaded machine
// had it): what is left is the loop busy with something else, or asleep past the
// timer.
type tick struct {
	mu       sync.Mutex
	maxLate  time.Duration
	fired    int
	over5    int
	waited   time.Duration // for a CPU, in all
	timer    eventloop.Timer
	deadline time.Time
	armWait  time.Duration // the loop thread's runDelay when the timer was armed
	stop     chan struct{}
}

const tickEvery = 10 * time.Millisecond

func startTicking(t *testing.T, l *eventloop.Loop) *tick {
	tk := &tick{stop: make(chan struct{})}
	arm := func() {
		tk.armWait = runDelay(t)
		tk.deadline = time.Now().Add(tickEvery)
		tk.timer.Reset(tickEvery)
	}
	l.Run(func() {
		l.InitTimer(&tk.timer, func(*eventloop.Timer) {
			late := time.Since(tk.deadline)
			waited := runDelay(t) - tk.armWait
			late = max(late-waited, 0)
			tk.mu.Lock()
			tk.maxLate = max(tk.maxLate, late)
			if late > 5*time.Millisecond {
				tk.over5++
			}
			tk.fired++
			tk.waited += waited
			tk.mu.Unlock()
			select {
			case <-tk.stop:
				return
			default:
			}
			arm()
		})
		arm()
	})
	return tk
}

func (tk *tick) result() (late time.Duration, fired int, waited time.Duration) {
	close(tk.stop)
	time.Sleep(3 * tickEvery)
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.maxLate, tk.fired, tk.waited
}

// checkAll starts n checks of user:password on the loop and waits for them all.
func checkAll(t *testing.T, l *eventloop.Loop, c *Checker, lc *LocConf, n int, password string) []Outcome {
	t.Helper()
	out := make([]Outcome, n)
	attempts := make([]Attempt, n)
	var wg sync.WaitGroup
	wg.Add(n)
	l.Run(func() {
		for i := range attempts {
			done := func(a *Attempt) { out[i] = a.Outcome; wg.Done() }
			if o := c.Check(&attempts[i], lc, basic("slow", password), done); o != Pending {
				out[i] = o
				wg.Done()
			}
		}
	})
	wg.Wait()
	return out
}

// The loop keeps serving while logins with bcrypt cost 12 are checked: its timers
// fire on time, though the verifier's worker shares the loop's CPU. Checked on the
// loop (as nginx checks on its worker), each login stalls every timer for a hash.
//
// Durations leave out the time the thread measured waited for a CPU (tick): under
// go test -race ./... on 2 CPUs a hash measured in wall time at one moment and
// timers at another differed by more than the factor of 2 the test allows, either
// way. That the worker yields its CPU to the loop is its lower priority, which
// TestVerifierPinsWorkers checks.
func TestLoopServesDuringBcrypt(t *testing.T) {
	if testing.Short() {
		t.Skip("bcrypt cost 12")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), 12)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lc := locConf("r", writeFile(t, dir, "users", "slow:"+string(hash)+"\n"))
	lc.File.Load(nil)
	h := lc.File.Table().Lookup([]byte("slow"))
	runtime.LockOSThread()
	wait0, start := runDelay(t), time.Now()
	h.Verify([]byte("x"))
	oneHash := time.Since(start) - (runDelay(t) - wait0)
	runtime.UnlockOSThread()

	cpus, err := numa.ThreadAffinity(0)
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpus.CPUs()[0]
	loop := startLoop(t, cpu, true)
	v, err := NewVerifier(VerifierConfig{CPUs: numa.NewCPUSet(cpu), Workers: 1, Nice: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()

	const n = 20
	tk := startTicking(t, loop)
	start = time.Now()
	outcomes := checkAll(t, loop, NewChecker(loop, v), lc, n, "wrong")
	took := time.Since(start)
	late, fired, waited := tk.result()
	for i, o := range outcomes {
		if o != Unauthorized {
			t.Fatalf("check %d: %v", i, o)
		}
	}
	t.Logf("one hash %v; %d hashes off the loop took %v; timers: %d fired, %d more than 5ms late, at most %v late, the loop waited %v for a CPU",
		oneHash, n, took, fired, tk.over5, late, waited)
	if late > oneHash/2 {
		t.Errorf("a timer was %v late while the verifier worked (one hash takes %v)", late, oneHash)
	}
	if want := int((took-waited)/tickEvery) / 3; fired < want {
		t.Errorf("%d timers fired in %v (%v of it waiting for a CPU), want at least %d", fired, took, waited, want)
	}
	if st := v.Stats(); st.Checked != n {
		t.Errorf("stats %+v", st)
	}

	// The same on the loop itself: a timer waits for a whole hash.
	tk = startTicking(t, loop)
	time.Sleep(3 * tickEvery)
	checkAll(t, loop, NewChecker(loop, nil), lc, 2, "wrong")
	late, _, _ = tk.result()
	t.Logf("checked on the loop: a timer was %v late", late)
	if late < oneHash/2 {
		t.Errorf("checked on the loop, timers were at most %v late; one hash takes %v", late, oneHash)
	}
}

// A full queue answers 503 at once rather than holding the request.
func TestVerifierQueueFull(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), 10)
	if err != nil {
		t.Fatal(err)
	}
	lc := locConf("r", writeFile(t, t.TempDir(), "users", "slow:"+string(hash)+"\n"))
	lc.File.Load(nil)
	loop := startLoop(t, -1, false)
	v, err := NewVerifier(VerifierConfig{Workers: 1, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	counts := map[Outcome]int{}
	for _, o := range checkAll(t, loop, NewChecker(loop, v), lc, 6, "right") {
		counts[o]++
	}
	// One running, two queued: at least three refused.
	if counts[Unavailable] < 3 || counts[Allowed] < 2 || counts[Allowed]+counts[Unavailable] != 6 {
		t.Errorf("outcomes %v", counts)
	}
	var a Attempt
	a.log, a.user = logBusy, []byte("slow")
	if got := string(a.AppendLog(nil)); got != `user "slow": password verification queue full` {
		t.Errorf("log %q", got)
	}
	if st := v.Stats(); st.Busy != uint64(counts[Unavailable]) {
		t.Errorf("stats %+v", st)
	}
}

// Close answers the queued jobs without checking them, and later submissions fail.
func TestVerifierClose(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("right"), 10)
	h := ParseHash(hash)
	loop := startLoop(t, -1, false)
	v, err := NewVerifier(VerifierConfig{Workers: 1, Queue: 8})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	jobs := make([]Job, 4)
	for i := range jobs {
		wg.Add(1)
		jobs[i] = Job{Hash: h, Password: []byte("right"), Loop: loop, Done: wg.Done}
		if err := v.Submit(&jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.Gosched()
	v.Close()
	wg.Wait()
	closed := 0
	for _, j := range jobs {
		if j.Err == ErrClosed {
			closed++
		} else if !j.Match {
			t.Error("a checked job did not match")
		}
	}
	if closed == 0 {
		t.Error("no queued job was answered ErrClosed")
	}
	if err := v.Submit(&Job{Hash: h, Loop: loop, Done: func() {}}); err != ErrClosed {
		t.Errorf("submit after close: %v", err)
	}
}

// The workers run on the domain's CPUs only, at a lower priority than the loops.
func TestVerifierPinsWorkers(t *testing.T) {
	cpus, err := numa.ThreadAffinity(0)
	if err != nil {
		t.Fatal(err)
	}
	want := numa.NewCPUSet(cpus.CPUs()[len(cpus.CPUs())-1])
	v, err := NewVerifier(VerifierConfig{CPUs: want, Nice: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	own, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	tids := v.Tids()
	if len(tids) != 1 {
		t.Fatalf("threads %v", tids)
	}
	for _, tid := range tids {
		got, err := numa.ThreadAffinity(tid)
		if err != nil || got != want {
			t.Errorf("thread %d: affinity %s (%v), want %s", tid, got.String(), err, want.String())
		}
		if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err != nil || 20-p != min(20-own+5, 19) {
			t.Errorf("thread %d: nice %d (%v), want %d", tid, 20-p, err, 20-own+5)
		}
	}
}
