package pool_test

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa/pool"
)

// threadCPU reports CPU ns per op of the calling thread beside ns/op, which
// on a loaded machine also counts time spent waiting for a CPU. Call it after
// ResetTimer; the goroutine stays locked to its thread until the benchmark ends.
func threadCPU(b *testing.B) {
	runtime.LockOSThread()
	start := threadTime(b)
	b.Cleanup(func() {
		b.ReportMetric(float64(threadTime(b)-start)/float64(b.N), "cpu-ns/op")
	})
}

func threadTime(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkLocalGetPut is the loop's steady state: one buffer out and back.
func BenchmarkLocalGetPut(b *testing.B) {
	d := newDomain(b, 0, 0, pool.Config{})
	l := newLocal(b, d)
	defer l.Close()
	l.Put(l.Get(16 << 10)) // warm: the first Get maps a chunk
	b.ReportAllocs()
	b.ResetTimer()
	threadCPU(b)
	for range b.N {
		buf := l.Get(16 << 10)
		buf[0] = 1
		l.Put(buf)
	}
}

// BenchmarkLocalGetPutBurst holds 256 buffers before returning them, so every
// iteration crosses the Local's batch marks and takes the reserve's lock.
func BenchmarkLocalGetPutBurst(b *testing.B) {
	d := newDomain(b, 0, 0, pool.Config{})
	l := newLocal(b, d)
	defer l.Close()
	held := make([][]byte, 256)
	for i := range held { // warm: map the chunks once
		held[i] = l.Get(16 << 10)
	}
	for _, buf := range held {
		l.Put(buf)
	}
	b.ReportAllocs()
	b.ResetTimer()
	threadCPU(b)
	for range b.N / len(held) {
		for i := range held {
			held[i] = l.Get(16 << 10)
		}
		for _, buf := range held {
			l.Put(buf)
		}
	}
}

// BenchmarkLocalGetPutParallel runs one Local per goroutine on one Domain.
func BenchmarkLocalGetPutParallel(b *testing.B) {
	d := newDomain(b, 0, 0, pool.Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		l, err := d.NewLocal()
		if err != nil {
			b.Error(err)
			return
		}
		defer l.Close()
		var held [64][]byte
		i := 0
		for pb.Next() {
			if held[i] != nil {
				l.Put(held[i])
			}
			held[i] = l.Get(16 << 10)
			i = (i + 1) % len(held)
		}
		for _, buf := range held {
			if buf != nil {
				l.Put(buf)
			}
		}
	})
}

// BenchmarkHeapFallbackGetPut is what the event loop calls.
func BenchmarkHeapFallbackGetPut(b *testing.B) {
	d := newDomain(b, 0, 0, pool.Config{})
	l := newLocal(b, d)
	defer l.Close()
	f := pool.NewHeapFallback(l)
	f.Put(f.Get(16 << 10))
	b.ReportAllocs()
	b.ResetTimer()
	threadCPU(b)
	for range b.N {
		f.Put(f.Get(16 << 10))
	}
}

// BenchmarkEventloopHeapPoolGetPut is the event loop's default pool, for comparison.
func BenchmarkEventloopHeapPoolGetPut(b *testing.B) {
	p := eventloop.NewHeapPool()
	p.Put(p.Get(16 << 10))
	b.ReportAllocs()
	b.ResetTimer()
	threadCPU(b)
	for range b.N {
		p.Put(p.Get(16 << 10))
	}
}

// BenchmarkEventloopHeapPoolParallel shares the event loop's default pool the
// way BenchmarkLocalGetPutParallel shares a Domain.
func BenchmarkEventloopHeapPoolParallel(b *testing.B) {
	p := eventloop.NewHeapPool()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var held [64][]byte
		i := 0
		for pb.Next() {
			if held[i] != nil {
				p.Put(held[i])
			}
			held[i] = p.Get(16 << 10)
			i = (i + 1) % len(held)
		}
		for _, buf := range held {
			if buf != nil {
				p.Put(buf)
			}
		}
	})
}
