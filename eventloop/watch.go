package eventloop

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FDWatch is a file descriptor the loop polls for input on behalf of code that
// does its own I/O on it, such as a DNS resolver's UDP sockets, which are not
// connections (no Handler, no output queue). It is level-triggered: the callback
// must read until EAGAIN, or it runs again on the next poll.
type FDWatch struct {
	loop *Loop
	fd   int
	fn   func()
}

// WatchFD registers the non-blocking fd with the loop: onReadable runs on the
// loop's thread whenever fd is readable or has a pending error (a connected UDP
// socket's ICMP error is read as the error of the next read). The loop owns fd
// from then on: Close closes it, and so does the loop when it exits. If WatchFD
// fails the caller still owns fd. Call it on the loop's thread.
func (l *Loop) WatchFD(fd int, onReadable func()) (*FDWatch, error) {
	w := &FDWatch{loop: l, fd: fd, fn: onReadable}
	gen := l.table.register(fd, slotWatch, unsafe.Pointer(w))
	if err := l.epollAdd(fd, gen, unix.EPOLLIN); err != nil {
		l.table.unregister(fd)
		return nil, fmt.Errorf("watch fd %d: %w", fd, err)
	}
	return w, nil
}

// Fd returns the watched file descriptor, -1 once closed.
func (w *FDWatch) Fd() int { return w.fd }

// Close stops watching and closes the fd; closing again does nothing. Call it on
// the loop's thread.
func (w *FDWatch) Close() error {
	if w.fd < 0 {
		return nil
	}
	fd := w.fd
	w.fd = -1
	w.loop.table.unregister(fd)
	// close(2) takes the fd out of the epoll set; an event already in this batch
	// carries the old generation and is dropped.
	return unix.Close(fd)
}

func (l *Loop) watchEvent(w *FDWatch) {
	defer l.recoverTask("fd watch")
	w.fn()
}

// closeWatches closes the fds still watched when the loop exits.
func (l *Loop) closeWatches() {
	l.table.each(slotWatch, func(s *slot) { _ = s.watch().Close() })
}
