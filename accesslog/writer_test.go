package accesslog

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/looptest"
	"github.com/numaproxy/numaproxy/rewrite"
)

// TestWriterPollsOffScheduler: while the writer polls for the lines of a log
// without buffer= (every millisecond, until pollIdle polls found none), no other
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
	time.Sleep(2 * pollIdle * pollInterval)
	var w *writer
	writers.mu.Lock()
	for _, w = range writers.by {
	}
	writers.mu.Unlock()
	for try := 0; try < 5; try++ {
		if st := k.RoundTrip(t, req); st != 200 {
			t.Fatalf("status %d", st)
		}
		time.Sleep(3 * time.Millisecond) // the writer polls from its first write
		naps0, others0 := w.naps.Load(), otherSwitches(t, int(w.tid.Load()))
		time.Sleep(30 * time.Millisecond)
		naps, others := int(w.naps.Load()-naps0), otherSwitches(t, int(w.tid.Load()))-others0
		t.Logf("%d polls, %d context switches of the other threads", naps, others)
		if naps < 10 {
			continue // the machine is busy: the writer hardly ran
		}
		// Measured: 0.5 to 1.3 switches of the other threads per poll (the
		// loop's yields, sysmon and its preemption of the writer); with
		// time.Sleep, 2.3 to 3.3.
		if others > naps*3/2 {
			t.Fatalf("%d polls woke the other threads %d times", naps, others)
		}
		return
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
