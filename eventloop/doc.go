// Package eventloop runs numaproxy's network I/O: one Loop per CPU, each a
// goroutine locked to an OS thread pinned to that CPU, owning its own
// SO_REUSEPORT listeners, connections, timers and buffers, so a connection
// never leaves the CPU (and NUMA domain) that accepted it.
//
// It is built on golang.org/x/sys/unix and gnet's exported pieces (pkg/socket and
// pkg/io helpers), not on gnet's engine, which cannot hand in listener fds, has no
// start hook, no read backpressure and no timers, and stops on EMFILE. It first
// waited inside gnet's netpoll.Poller too; its own epoll_wait and eventfd task
// queue replaced it when measurements showed the Poller's wake-ups cost a locked
// thread futex hand-offs (poll.go). Protocol code implements Handler and sees each connection through
// the narrow Conn interface, which a TLS layer can wrap.
//
// Everything a Loop owns is touched only on its own thread. Other goroutines
// reach a loop through Run (the task queue), Drain and Stop.
package eventloop
