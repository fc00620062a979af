package main

import (
	"fmt"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runRelay is the "relay" proxy: the least CPU any epoll proxy can spend on a
// keep-alive request, to set the proxies' figures against. One thread, each
// client connection paired at accept with an upstream connection of its own,
// bytes passed on as they come: per request one read and one write each way and
// a share of an epoll_pwait, no parsing, no pooling, no timers. It is an HTTP
// proxy only for clients that send one request at a time on connections the
// upstream keeps open, as the keep-alive shapes' wrk does; a short write closes
// both connections (wrk counts the error). Like numaproxy's loops, the thread
// waits in a raw epoll_pwait and keeps its P (GOMAXPROCS 2 leaves one for the
// runtime).
func runRelay(listen, upstream string) error {
	la, err := netip.ParseAddrPort(listen)
	if err != nil {
		return err
	}
	ua, err := netip.ParseAddrPort(upstream)
	if err != nil {
		return err
	}
	runtime.GOMAXPROCS(2)
	runtime.LockOSThread()
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: int(la.Port()), Addr: la.Addr().As4()}); err != nil {
		return fmt.Errorf("bind %s: %w", listen, err)
	}
	if err := unix.Listen(lfd, 1024); err != nil {
		return err
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return err
	}
	r := &relay{ep: ep, lfd: lfd, up: &unix.SockaddrInet4{Port: int(ua.Port()), Addr: ua.Addr().As4()}, peer: make([]int32, noFile)}
	for i := range r.peer {
		r.peer[i] = -1
	}
	for {
		r.batch()
	}
}

type relay struct {
	ep, lfd int
	up      *unix.SockaddrInet4
	peer    []int32 // by fd: the other end of its pair, -1 for none
	events  [256]unix.EpollEvent
	buf     [16 << 10]byte
}

// batch waits for one batch of events (raw system call: the thread keeps its P)
// and relays what came.
func (r *relay) batch() {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(r.ep), uintptr(unsafe.Pointer(&r.events[0])),
		uintptr(len(r.events)), 50, 0, 0)
	if errno != 0 {
		return // EINTR: a preemption signal
	}
	for i := range int(n) {
		fd := int(r.events[i].Fd)
		if fd == r.lfd {
			r.accept()
			continue
		}
		p := r.peer[fd]
		if p < 0 {
			continue // closed earlier in this batch
		}
		got, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		if errno == unix.EAGAIN {
			continue
		}
		if errno != 0 || got == 0 {
			r.closePair(fd)
			continue
		}
		put, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(p), uintptr(unsafe.Pointer(&r.buf[0])), got)
		if errno != 0 || put != got {
			r.closePair(fd)
		}
	}
}

// accept takes the waiting connections and pairs each with a new upstream
// connection (a blocking connect: the shapes connect during their warm-up).
func (r *relay) accept() {
	for {
		cfd, _, err := unix.Accept4(r.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		ufd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			unix.Close(cfd)
			continue
		}
		if err := unix.Connect(ufd, r.up); err != nil || cfd >= len(r.peer) || ufd >= len(r.peer) {
			unix.Close(cfd)
			unix.Close(ufd)
			continue
		}
		unix.SetNonblock(ufd, true)
		for _, fd := range []int{cfd, ufd} {
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		}
		r.peer[cfd], r.peer[ufd] = int32(ufd), int32(cfd)
		unix.EpollCtl(r.ep, unix.EPOLL_CTL_ADD, cfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(cfd)})
		unix.EpollCtl(r.ep, unix.EPOLL_CTL_ADD, ufd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ufd)})
	}
}

func (r *relay) closePair(fd int) {
	p := int(r.peer[fd])
	r.peer[fd], r.peer[p] = -1, -1
	unix.Close(fd) // closing removes both from the epoll set
	unix.Close(p)
}
