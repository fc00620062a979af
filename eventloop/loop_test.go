package eventloop

import (
	"errors"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

func TestLoopsPinnedToTheirCPU(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	var hookTids [numa.MaxCPUs]atomic.Int32
	cfg := Config{Handler: echoHandler(), OnStart: func(l *Loop) error {
		hookTids[l.CPU()].Store(int32(unix.Gettid()))
		return nil
	}}
	cfg.Logger, _ = newLogger()
	g, err := NewGroup(allowed.CPUs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Stop(); waitDone(t, g.Done()) }()

	for _, l := range g.Loops() {
		var tid int
		var set unix.CPUSet
		onLoop(t, l, func() {
			tid = unix.Gettid()
			_ = unix.SchedGetaffinity(0, &set)
		})
		if tid != l.Tid() || int32(tid) != hookTids[l.CPU()].Load() {
			t.Errorf("loop cpu %d: task ran on tid %d, loop tid %d, start hook tid %d", l.CPU(), tid, l.Tid(), hookTids[l.CPU()].Load())
		}
		if numa.CPUSet(set) != numa.NewCPUSet(l.CPU()) {
			t.Errorf("loop cpu %d: thread affinity %s", l.CPU(), numa.CPUSet(set))
		}
		// And as seen from outside the loop, by tid.
		got, err := numa.ThreadAffinity(l.Tid())
		if err != nil || got != numa.NewCPUSet(l.CPU()) {
			t.Errorf("loop cpu %d: affinity of tid %d read from outside = %s, %v", l.CPU(), l.Tid(), got, err)
		}
	}
}

func TestStartHookErrorFailsStart(t *testing.T) {
	before := countFds(t)
	l, err := New(Config{CPU: -1, Handler: echoHandler(), OnStart: func(*Loop) error { return errors.New("no policy") }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err == nil {
		t.Fatal("Start succeeded")
	}
	waitDone(t, l.Done())
	if err := l.Run(func() {}); !errors.Is(err, ErrLoopClosed) {
		t.Errorf("Run on exited loop = %v", err)
	}
	if after := countFds(t); after != before {
		t.Errorf("fds %d before, %d after", before, after)
	}
}

func TestStopUnstartedLoopReleasesFds(t *testing.T) {
	before := countFds(t)
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, l.Done())
	if after := countFds(t); after != before {
		t.Errorf("fds %d before, %d after", before, after)
	}
}

func TestTaskPanicKeepsLoop(t *testing.T) {
	l, addr := startLoop(t, Config{Handler: echoHandler()})
	if err := l.Run(func() { panic("task boom") }); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)
	defer c.Close()
	if got := roundTrip(t, c, "still here"); got != "still here" {
		t.Fatalf("echo %q", got)
	}
	if l.Stats().Panics != 1 {
		t.Errorf("panics = %d", l.Stats().Panics)
	}
}
