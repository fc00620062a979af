package eventloop

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Group is a set of loops, one per CPU, serving the same listen addresses.
type Group struct {
	loops []*Loop
	done  chan struct{}
}

// NewGroup makes one loop per CPU in cpus, each with cfg and its own CPU.
func NewGroup(cpus []int, cfg Config) (*Group, error) {
	if len(cpus) == 0 {
		return nil, errors.New("eventloop: no cpu for the loops")
	}
	g := &Group{done: make(chan struct{})}
	for _, cpu := range cpus {
		c := cfg
		c.CPU = cpu
		l, err := New(c)
		if err != nil {
			_ = g.Stop()
			return nil, err
		}
		g.loops = append(g.loops, l)
	}
	return g, nil
}

// Loops returns the group's loops in CPU order of creation.
func (g *Group) Loops() []*Loop { return g.loops }

// Listen gives every loop its own SO_REUSEPORT listener on addr. Port 0 picks
// one free port for all of them. Call before Start.
func (g *Group) Listen(addr string, backlog int) (netip.AddrPort, error) {
	ap, err := ParseListenAddr(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	for _, l := range g.loops {
		ln, err := ListenAddrPort(ap, backlog)
		if err != nil {
			return netip.AddrPort{}, err
		}
		if err := l.AddListener(ln); err != nil {
			_ = ln.Close()
			return netip.AddrPort{}, err
		}
		ap = ln.Addr()
	}
	return ap, nil
}

// Start starts every loop; if one fails, the started ones are stopped.
func (g *Group) Start() error {
	for _, l := range g.loops {
		if err := l.Start(); err != nil {
			_ = g.Stop()
			for _, s := range g.loops {
				<-s.Done()
			}
			return fmt.Errorf("start loops: %w", err)
		}
	}
	go func() {
		for _, l := range g.loops {
			<-l.Done()
		}
		close(g.done)
	}()
	return nil
}

// Drain drains every loop with the same deadline; wait on Done.
func (g *Group) Drain(deadline time.Time) error {
	var errs []error
	for _, l := range g.loops {
		if err := l.Drain(deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops every loop now (releasing unstarted ones at once); wait on Done.
func (g *Group) Stop() error {
	var errs []error
	for _, l := range g.loops {
		if err := l.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Done is closed once every loop has exited (after a successful Start).
func (g *Group) Done() <-chan struct{} { return g.done }
