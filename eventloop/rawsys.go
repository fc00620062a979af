package eventloop

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loop's socket system calls are raw: none of them blocks (every socket is
// non-blocking, and none has a lingering SO_LINGER), so the Go scheduler need not
// hear of them. Through unix.Read and friends each one went through
// entersyscall/exitsyscall, which put the loop's P in the syscall state many
// thousand times a second; when sysmon's 10 ms preemption tick found it there, it
// took the P away (a hand-off through futexes to get it back) and went back to
// waking every 20 µs. Raw, the loop is simply running, as it already is while it
// waits in epoll_pwait with HoldP: sysmon backs off to 10 ms and only preempts.

func rawErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func rawRead(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// rawWritev writes up to maxIovecs buffers (the rest is ignored) with the loop's
// iovec array, cleared afterwards so that it keeps no buffer alive.
func (l *Loop) rawWritev(fd int, bufs [][]byte) (int, error) {
	n := 0
	for _, b := range bufs {
		if n == maxIovecs {
			break
		}
		if len(b) == 0 {
			continue
		}
		l.iovecs[n].Base = &b[0]
		l.iovecs[n].SetLen(len(b))
		n++
	}
	if n == 0 {
		return 0, nil
	}
	var r uintptr
	var e unix.Errno
	if l.writeMore {
		// WritevCorked: the same with MSG_MORE.
		m := unix.Msghdr{Iov: &l.iovecs[0]}
		m.SetIovlen(n)
		r, _, e = unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&m)), unix.MSG_MORE|unix.MSG_NOSIGNAL)
		l.moreSent = l.moreSent || e == 0
	} else {
		r, _, e = unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&l.iovecs[0])), uintptr(n))
	}
	clear(l.iovecs[:n])
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// rawClose closes a socket; regular files (which may block on close) go
// through unix.Close.
func rawClose(fd int) error {
	_, _, e := unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
	return rawErr(e)
}

// rawShutdownWrite sends the FIN (shutdown(2) SHUT_WR) after what the socket holds.
func rawShutdownWrite(fd int) error {
	_, _, e := unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
	return rawErr(e)
}

func rawEpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return rawErr(e)
}

func rawSetsockoptInt(fd, level, opt, v int) error {
	iv := int32(v)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&iv)), 4, 0)
	return rawErr(e)
}
