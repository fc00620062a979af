package accesslog

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/rewrite"
)

// TestWriterPollsOffScheduler: while the writer polls for the lines of a log
// without buffer= (every pollInterval, until pollIdle polls found none), no other
// thread of the process wakes for it. With time.Sleep on its locked thread, every
// poll woke other threads (one ran the timer and handed the writer's P back).
func TestWriterPollsOffScheduler(t *testing.T) {
	addr := looptest.Addr(t)
	startHoldP(t, addr, "server { listen "+addr+"; access_log logs/access.log; location / { return 200 \"ok\\n\"; } }")
	k := looptest.Dial(t, addr)
	req := []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	// The first line starts the writer (and changes GOMAXPROCS: a stop of the
	// world); let its polling end.
	if st := k.RoundTrip(t, req); st != 200 {
		t.Fatalf("status %d", st)
	}
	time.Sleep(10 * time.Millisecond)
	var w *writer
	writers.mu.Lock()
	for _, w = range writers.by {
	}
	writers.mu.Unlock()
	const window = 15 * pollInterval // less than pollIdle polls
	// Other processes (the packages go test runs alongside) add switches now and
	// then: a window that shows more than the polls allow is measured again, and
	// only five such windows in a row fail (time.Sleep's wake-ups show in every one).
	excess := ""
	for try := 0; try < 5; try++ {
		// The other threads' switches without the writer polling (sysmon, the
		// loop's yields) ...
		time.Sleep(2 * pollIdle * pollInterval)
		idle0 := otherSwitches(t, int(w.tid.Load()))
		time.Sleep(window)
		idle := otherSwitches(t, int(w.tid.Load())) - idle0
		// ... and with it.
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
		time.Sleep(3 * time.Millisecond) // the writer polls from its first write
		naps0, others0 := w.naps.Load(), otherSwitches(t, int(w.tid.Load()))
		time.Sleep(window)
		naps, others := int(w.naps.Load()-naps0), otherSwitches(t, int(w.tid.Load()))-others0
		t.Logf("%d polls, %d context switches of the other threads (%d without polls)", naps, others, idle)
		if naps < 10 {
			continue // the machine is busy: the writer hardly ran
		}
		// Measured: at most a switch of the other threads per poll more than
		// without polls (the loop's yields, sysmon and its preemption of the
		// writer); with time.Sleep, 2.3 to 3.3 per poll.
		if others-idle > naps {
			excess = fmt.Sprintf("%d polls woke the other threads %d times (%d without polls)", naps, others, idle)
			continue
		}
		return
	}
	if excess != "" {
		t.Fatal(excess)
	}
	t.Skip("the writer did not get to poll")
}

// startHoldP is startWorker with the loop as numaproxy runs it: holding its P in
// epoll_wait (eventloop.Config.HoldP), which sets GOMAXPROCS.
func startHoldP(t *testing.T, addr, src string) {
	reg := conf.MustRegistry(httpcore.Module, rewrite.Module, Module)
	cfg, _ := looptest.Load(t, reg, "events {}\nhttp {\n"+src+"\n}\n")
	looptest.StartHoldP(t, cfg, nil, addr)
}

// otherSwitches sums the voluntary context switches of the process's threads but
// tid.
func otherSwitches(t *testing.T, tid int) int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(tid) {
			continue
		}
		data, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				c, _ := strconv.Atoi(strings.TrimSpace(v))
				n += c
			}
		}
	}
	return n
}

// TestWriterWokenWhenBehind: a writer napping between polls is woken by the loop
// that queues the wakeBacklog-th chunk, not only at the end of its nap (a fast
// loop would run out of buffers first), and not by fewer chunks. (A nap also ends
// when sysmon preempts the thread, every 10 ms or so: the test naps again until
// a loop bumped napSeq.)
func TestWriterWokenWhenBehind(t *testing.T) {
	addr := looptest.Addr(t)
	startHoldP(t, addr, "server { listen "+addr+"; location / { return 200 \"ok\\n\"; } }") // eventloop.ReservedP
	eventloop.ReserveP()
	w := &writer{in: make(chan chunk, queueLen)}
	woke := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := time.Now()
		for w.napSeq.Load() == 0 {
			w.napFor(time.Minute)
		}
		woke <- time.Since(start)
	}()
	for !w.napping.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // in its futex wait
	for range wakeBacklog - 1 {
		w.in <- chunk{}
		w.wakeIfBehind()
	}
	select {
	case d := <-woke:
		t.Fatalf("woken after %v by %d chunks", d, wakeBacklog-1)
	case <-time.After(100 * time.Millisecond):
	}
	w.in <- chunk{}
	w.wakeIfBehind()
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer naps on")
	}
}
