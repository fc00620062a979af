package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An open-loop (constant-rate) load generator in the manner of wrk2: every send
// time is fixed up front (request j at start + j/rate, on connection j mod N),
// and latency is measured from that intended time, so a stalled response is
// charged to every request scheduled behind it (no coordinated omission). One
// locked OS thread runs an epoll loop over raw non-blocking keep-alive sockets and
// sleeps with epoll_pwait2's nanosecond timeout, not the Go timer (whose idle
// poll rounds up to a millisecond).

type openLoopConfig struct {
	addr     netip.AddrPort
	request  []byte
	rate     float64 // requests per second
	conns    int
	duration time.Duration
}

type openLoopResult struct {
	Scheduled int     `json:"scheduled"`
	Completed int     `json:"completed"`
	Errors    int     `json:"errors"`
	ErrorKind string  `json:"error_kind,omitempty"` // the first error seen
	Rate      float64 `json:"achieved_rate"`
	// Latencies from intended send time, in microseconds.
	P50, P90, P99, P999, Max float64
	// Generator lag: how late requests were written to an idle connection, µs (a
	// high value means the load side, not the proxy, was behind).
	LagP99 float64 `json:"lag_p99"`
	// Requests that waited for their connection (the previous response was late).
	Queued     int `json:"queued"`
	Reconnects int `json:"reconnects"`
}

type olConn struct {
	fd      int
	busy    bool
	cur     int64   // intended send time of the request in flight (ns since base)
	backlog []int64 // intended times waiting for this connection
	buf     []byte
	n       int
}

func dialRaw(addr netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	a := addr.Addr().As4()
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a})
	if errors.Is(err, unix.EINTR) {
		// A signal (the Go runtime's preemption) interrupted the blocking connect; the
		// handshake goes on: wait for it and take its outcome from SO_ERROR.
		err = waitConnected(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %s: %w", addr, err)
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return fd, nil
}

// waitConnected waits for an interrupted connect to finish.
func waitConnected(fd int) error {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if _, err := unix.Poll(pfd, 5000); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		if pfd[0].Revents == 0 {
			return unix.ETIMEDOUT
		}
		errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if errno != 0 {
			return unix.Errno(errno)
		}
		return nil
	}
}

// epollWaitNs waits up to timeout nanoseconds (-1: forever) with epoll_pwait2.
func epollWaitNs(epfd int, events []unix.EpollEvent, timeout int64) (int, error) {
	var tsp unsafe.Pointer
	var ts unix.Timespec
	if timeout >= 0 {
		ts = unix.NsecToTimespec(timeout)
		tsp = unsafe.Pointer(&ts)
	}
	n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(tsp), 0, 0)
	if e == unix.ENOSYS {
		ms := -1
		if timeout >= 0 {
			ms = int((timeout + 999999) / 1000000)
		}
		return unix.EpollWait(epfd, events, ms)
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func runOpenLoop(cfg openLoopConfig) (openLoopResult, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Timer slack of 1 ns for this thread: wake-ups on time, not 50 µs late.
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)

	var res openLoopResult
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return res, err
	}
	defer unix.Close(epfd)
	conns := make([]*olConn, cfg.conns)
	byFd := map[int]*olConn{}
	open := func(c *olConn) error {
		fd, err := dialRaw(cfg.addr)
		if err != nil {
			return err
		}
		unix.SetNonblock(fd, true)
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(fd)
			return err
		}
		c.fd, c.n = fd, 0
		byFd[fd] = c
		return nil
	}
	closeConn := func(c *olConn) {
		delete(byFd, c.fd)
		unix.Close(c.fd)
		c.fd = -1
	}
	defer func() {
		for _, c := range conns {
			if c != nil && c.fd >= 0 {
				unix.Close(c.fd)
			}
		}
	}()
	for i := range conns {
		conns[i] = &olConn{fd: -1, buf: make([]byte, 64<<10)}
		if err := open(conns[i]); err != nil {
			return res, err
		}
	}

	interval := float64(time.Second) / cfg.rate
	total := int(cfg.rate * cfg.duration.Seconds())
	res.Scheduled = total
	lat := make([]int64, 0, total)
	lags := make([]int64, 0, total)
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	start := int64(5 * time.Millisecond) // leave time to enter the loop
	fail := func(err error) {
		res.Errors++
		if res.ErrorKind == "" {
			res.ErrorKind = err.Error()
		}
	}
	outstanding := 0
	var send func(c *olConn, intended int64)
	send = func(c *olConn, intended int64) {
		if c.fd < 0 {
			if err := open(c); err != nil {
				fail(err)
				outstanding--
				return
			}
			res.Reconnects++
		}
		c.busy, c.cur = true, intended
		if _, err := unix.Write(c.fd, cfg.request); err != nil {
			// The request is lost; reconnect and carry on with the backlog.
			fail(fmt.Errorf("write: %w", err))
			outstanding--
			closeConn(c)
			c.busy = false
			if len(c.backlog) > 0 {
				next := c.backlog[0]
				c.backlog = c.backlog[1:]
				send(c, next)
			}
		}
	}
	next := 0
	events := make([]unix.EpollEvent, len(conns))
	deadline := int64(-1)
	for {
		t := now()
		for next < total {
			intended := start + int64(float64(next)*interval)
			if intended > t {
				break
			}
			c := conns[next%len(conns)]
			outstanding++
			if c.busy {
				c.backlog = append(c.backlog, intended)
				res.Queued++
			} else {
				lags = append(lags, t-intended)
				send(c, intended)
			}
			next++
		}
		if next >= total && outstanding == 0 {
			break
		}
		timeout := int64(-1)
		if next < total {
			timeout = max(0, start+int64(float64(next)*interval)-now())
		} else {
			if deadline < 0 {
				deadline = now() + int64(5*time.Second)
			}
			timeout = deadline - now()
			if timeout <= 0 {
				break
			}
		}
		n, err := epollWaitNs(epfd, events, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return res, fmt.Errorf("epoll: %w", err)
		}
		for _, ev := range events[:n] {
			c := byFd[int(ev.Fd)]
			if c == nil {
				continue
			}
			for c.fd >= 0 {
				if c.n == len(c.buf) {
					c.buf = slices.Grow(c.buf, len(c.buf))[:2*len(c.buf)]
				}
				m, err := unix.Read(c.fd, c.buf[c.n:])
				if errors.Is(err, unix.EAGAIN) {
					break
				}
				if err != nil || m == 0 {
					if err == nil {
						err = io.EOF
					}
					if c.busy {
						fail(fmt.Errorf("read: %w", err))
						outstanding--
						c.busy = false
					}
					closeConn(c)
					break
				}
				c.n += m
				for c.busy && c.fd >= 0 {
					r, perr := parseResponse(c.buf[:c.n], false)
					if perr == errIncomplete {
						break
					}
					done := now()
					outstanding--
					c.busy = false
					if perr != nil {
						fail(perr)
						closeConn(c)
					} else {
						if r.status != 200 {
							fail(fmt.Errorf("status %d", r.status))
						} else {
							lat = append(lat, done-c.cur)
						}
						copy(c.buf, c.buf[r.size:c.n])
						c.n -= r.size
						if r.close {
							closeConn(c)
						}
					}
					if len(c.backlog) > 0 {
						next := c.backlog[0]
						c.backlog = c.backlog[1:]
						send(c, next)
					}
				}
			}
		}
	}
	elapsed := now() - start
	res.Completed = len(lat)
	res.Errors += outstanding // never answered before the drain deadline
	if elapsed > 0 {
		res.Rate = float64(res.Completed) / (float64(elapsed) / 1e9)
	}
	slices.Sort(lat)
	slices.Sort(lags)
	us := func(v int64) float64 { return float64(v) / 1e3 }
	res.P50, res.P90, res.P99, res.P999 = us(pct(lat, 50)), us(pct(lat, 90)), us(pct(lat, 99)), us(pct(lat, 99.9))
	if len(lat) > 0 {
		res.Max = us(lat[len(lat)-1])
	}
	res.LagP99 = us(pct(lags, 99))
	return res, nil
}

// pct returns the p-th percentile of sorted values (nearest rank).
func pct(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
