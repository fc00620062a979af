package eventloop

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// DefaultBacklog is nginx's listen backlog on Linux.
const DefaultBacklog = 511

// Listener is a listening TCP socket owned by one loop. Each loop has its own
// socket per address, grouped by SO_REUSEPORT, so the kernel (or a BPF
// program given Fd) picks the loop for each new connection.
type Listener struct {
	fd   int
	addr netip.AddrPort

	loop   *Loop
	last   bool // being removed: accept what is queued whatever MaxConns says
	gen    uint32
	paused bool // not polled: at MaxConns or out of fds with nothing idle to close
	retry  Timer
	closed bool
	// noDelay: how accepted connections get TCP_NODELAY (acceptedNoDelay).
	noDelay noDelayWay
	// deferred: TCP_DEFER_ACCEPT is on, so an accepted connection's first bytes are
	// (most often) there already. Atomic: SetOptions runs on reload's goroutine.
	deferred atomic.Bool
}

// ListenOptions are options of a listening socket that accepted connections inherit
// (buffer sizes, keep-alive) or that shape accepting (backlog, TCP_DEFER_ACCEPT,
// TCP_FASTOPEN). Zero values leave the system default.
type ListenOptions struct {
	Backlog   int // <= 0: DefaultBacklog
	RcvBuf    int
	SndBuf    int
	KeepAlive int // SO_KEEPALIVE: 1 on, -1 off, 0 as the system has it
	KeepIdle  int // seconds
	KeepIntvl int // seconds
	KeepCnt   int
	// DeferAccept is TCP_DEFER_ACCEPT in seconds: the connection is accepted only
	// once data arrives (or the time passes).
	DeferAccept int
	FastOpen    int // TCP_FASTOPEN queue length
}

// apply sets the options other than the backlog on a socket.
func (o ListenOptions) apply(fd int) error {
	set := func(level, opt, v int, name string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	type option struct {
		on         bool
		level, opt int
		value      int
		name       string
	}
	for _, s := range []option{
		{o.RcvBuf > 0, unix.SOL_SOCKET, unix.SO_RCVBUF, o.RcvBuf, "SO_RCVBUF"},
		{o.SndBuf > 0, unix.SOL_SOCKET, unix.SO_SNDBUF, o.SndBuf, "SO_SNDBUF"},
		{o.KeepAlive != 0, unix.SOL_SOCKET, unix.SO_KEEPALIVE, max(o.KeepAlive, 0), "SO_KEEPALIVE"},
		{o.KeepIdle > 0, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, o.KeepIdle, "TCP_KEEPIDLE"},
		{o.KeepIntvl > 0, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, o.KeepIntvl, "TCP_KEEPINTVL"},
		{o.KeepCnt > 0, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, o.KeepCnt, "TCP_KEEPCNT"},
		// Always set, so that a reload that drops deferred or fastopen turns them off.
		{true, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, o.DeferAccept, "TCP_DEFER_ACCEPT"},
		{o.FastOpen > 0, unix.IPPROTO_TCP, unix.TCP_FASTOPEN, o.FastOpen, "TCP_FASTOPEN"},
	} {
		if s.on {
			if err := set(s.level, s.opt, s.value, s.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetOptions applies opts to a listening socket, the backlog included (listen(2)
// again on a listening socket changes it): reload does this for the addresses it
// keeps, as nginx reconfigures its listening sockets.
func (ln *Listener) SetOptions(opts ListenOptions) error {
	if err := opts.apply(ln.fd); err != nil {
		return fmt.Errorf("listener %s: %w", ln.addr, err)
	}
	ln.deferred.Store(opts.DeferAccept > 0)
	backlog := opts.Backlog
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	if err := unix.Listen(ln.fd, backlog); err != nil {
		return fmt.Errorf("listener %s: listen: %w", ln.addr, err)
	}
	return nil
}

// Listen opens a non-blocking, close-on-exec TCP listener with SO_REUSEADDR
// and SO_REUSEPORT (IPV6_V6ONLY for IPv6) made with x/sys/unix: not
// net.Listen, whose default MPTCP sockets cannot join a BPF socket array.
// backlog <= 0 means DefaultBacklog.
func Listen(addr string, backlog int) (*Listener, error) {
	ap, err := ParseListenAddr(addr)
	if err != nil {
		return nil, err
	}
	return ListenAddrPort(ap, backlog)
}

// ListenAddrPort is Listen for a parsed address.
func ListenAddrPort(addr netip.AddrPort, backlog int) (*Listener, error) {
	return ListenWith(addr, ListenOptions{Backlog: backlog})
}

// ListenWith is ListenAddrPort with socket options.
func ListenWith(addr netip.AddrPort, opts ListenOptions) (*Listener, error) {
	backlog := opts.Backlog
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	sa, family := toSockaddr(addr)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, fmt.Errorf("listen %s: socket: %w", addr, err)
	}
	fail := func(op string, err error) (*Listener, error) {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %s: %w", addr, op, err)
	}
	if err := socket.SetReuseAddr(fd, 1); err != nil {
		return fail("SO_REUSEADDR", err)
	}
	if err := socket.SetReuseport(fd, 1); err != nil {
		return fail("SO_REUSEPORT", err)
	}
	if family == unix.AF_INET6 {
		if err := socket.SetIPv6Only(fd, 1); err != nil {
			return fail("IPV6_V6ONLY", err)
		}
	}
	if err := opts.apply(fd); err != nil {
		return fail("options", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail("listen", err)
	}
	ln := &Listener{fd: fd}
	if ln.addr, err = localAddr(fd); err != nil {
		return fail("getsockname", err)
	}
	ln.deferred.Store(opts.DeferAccept > 0)
	return ln, nil
}

// ListenerFromFD adopts an inherited listening socket (e.g. passed across a
// binary upgrade): it checks the fd listens on TCP, makes it non-blocking and
// close-on-exec, and takes ownership of it.
func ListenerFromFD(fd int) (*Listener, error) {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil {
		return nil, fmt.Errorf("listener fd %d: SO_ACCEPTCONN: %w", fd, err)
	} else if v == 0 {
		return nil, fmt.Errorf("listener fd %d: socket is not listening", fd)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || v != unix.IPPROTO_TCP {
		return nil, fmt.Errorf("listener fd %d: not a TCP socket (protocol %d, %v)", fd, v, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("listener fd %d: set non-blocking: %w", fd, err)
	}
	unix.CloseOnExec(fd)
	addr, err := localAddr(fd)
	if err != nil {
		return nil, fmt.Errorf("listener fd %d: getsockname: %w", fd, err)
	}
	ln := &Listener{fd: fd, addr: addr}
	if v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT); err == nil && v > 0 {
		ln.deferred.Store(true)
	}
	return ln, nil
}

// Fd returns the listening socket, e.g. for a BPF socket array or to pass to
// a new process. It stays owned by the Listener.
func (ln *Listener) Fd() int { return ln.fd }

// Addr returns the address the socket is bound to (with the actual port if 0 was asked).
func (ln *Listener) Addr() netip.AddrPort { return ln.addr }

// Close closes a listener that was never added to a loop; a loop closes its
// own listeners on Drain and Stop.
func (ln *Listener) Close() error {
	if ln.loop != nil {
		return fmt.Errorf("listener %s: owned by loop cpu %d", ln.addr, ln.loop.cfg.CPU)
	}
	if ln.closed {
		return nil
	}
	ln.closed = true
	if err := unix.Close(ln.fd); err != nil {
		return fmt.Errorf("close listener %s: %w", ln.addr, err)
	}
	return nil
}

// AddListener hands ln to the loop, which polls it for connections served by
// Config.Handler and closes it on Drain or Stop. Before Start it registers at
// once; on a running loop it goes through the task queue and waits, so it must
// not be called from the loop's own thread.
func (l *Loop) AddListener(ln *Listener) error {
	if ln.loop != nil || ln.closed {
		return fmt.Errorf("listener %s: already added or closed", ln.addr)
	}
	if l.state.Load() == stateNew {
		return l.addListener(ln)
	}
	errc := make(chan error, 1)
	if err := l.Run(func() { errc <- l.addListener(ln) }); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-l.done:
		return ErrLoopClosed
	}
}

func (l *Loop) addListener(ln *Listener) error {
	if l.state.Load() > stateRunning {
		return fmt.Errorf("listener %s: loop cpu %d is draining", ln.addr, l.cfg.CPU)
	}
	ln.noDelay = noDelayUnchecked
	if rawSetsockoptInt(ln.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) != nil {
		ln.noDelay = noDelayEach
	}
	ln.gen = l.table.register(ln.fd, slotListener, unsafe.Pointer(ln))
	if err := l.epollAdd(ln.fd, ln.gen, unix.EPOLLIN); err != nil {
		l.table.unregister(ln.fd)
		return fmt.Errorf("listener %s: %w", ln.addr, err)
	}
	ln.loop = l
	l.InitTimer(&ln.retry, func(*Timer) { l.resumeAccept(ln) })
	l.listeners = append(l.listeners, ln)
	return nil
}

// Listeners returns the loop's listeners (read it on the loop or before Start).
func (l *Loop) Listeners() []*Listener { return l.listeners }

// RemoveListener takes ln out of the loop: what is already in its accept queue is
// accepted and served, then the socket is closed (a closed listener resets what is
// still queued, so empty the queue first, e.g. by stopping new SYNs from reaching
// it). It waits for the loop.
func (l *Loop) RemoveListener(ln *Listener) error {
	errc := make(chan error, 1)
	if err := l.Run(func() {
		if ln.loop != l {
			errc <- fmt.Errorf("listener %s: not on this loop", ln.addr)
			return
		}
		if ln.paused {
			l.resumeAccept(ln)
		}
		ln.last = true // these are the last: worker_connections does not hold them back
		l.acceptEvent(ln)
		l.closeListener(ln)
		for i, x := range l.listeners {
			if x == ln {
				l.listeners = append(l.listeners[:i], l.listeners[i+1:]...)
				break
			}
		}
		errc <- nil
	}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-l.done:
		return ErrLoopClosed
	}
}

func (l *Loop) closeListener(ln *Listener) {
	if ln.closed {
		return
	}
	ln.closed = true
	if ln.paused {
		ln.paused = false
		l.acceptPause--
	}
	ln.retry.Stop()
	l.table.unregister(ln.fd)
	l.epollDel(ln.fd)
	_ = unix.Close(ln.fd)
}
