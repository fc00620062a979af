// Package server assembles the running data path from a configuration snapshot: one
// event loop per CPU, grouped by NUMA domain, each with its proxy worker, its own
// listener on every address and its own buffer pool; reload, drain and stop.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
	"github.com/numaproxy/numaproxy/eventloop"
	"github.com/numaproxy/numaproxy/numa"
	"github.com/numaproxy/numaproxy/proxy"
)

// Server is the running data path: one event loop per CPU, each with its proxy
// worker and its own listener on every address.
type Server struct {
	loops   []*eventloop.Loop
	workers []*proxy.Worker
	addrs   map[netip.AddrPort]bool
	log     *slog.Logger
}

// loopCPUs is where the loops go: worker_cpu_affinity's CPUs, else one loop per CPU
// the process may use (worker_processes auto) or N loops spread over those CPUs.
func loopCPUs(m conf.Main) ([]int, error) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	arg := "auto"
	if m.WorkerProcesses > 0 {
		arg = strconv.Itoa(m.WorkerProcesses)
	}
	n, err := numa.WorkerCount(arg, allowed)
	if err != nil {
		return nil, err
	}
	if m.WorkerCPUAffinity.Args != nil {
		sets, err := numa.ParseCPUAffinity(m.WorkerCPUAffinity.Args, n, allowed)
		if err != nil {
			return nil, err
		}
		return numa.FirstCPUs(sets), nil
	}
	all := allowed.CPUs()
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = all[i%len(all)]
	}
	return cpus, nil
}

// Start builds the loops and listeners of cfg and starts them.
func Start(cfg *conf.Config, snap *proxy.Snapshot, log *slog.Logger) (*Server, error) {
	cpus, err := loopCPUs(cfg.Main)
	if err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(numa.GOMAXPROCS(len(cpus)))
	s := &Server{addrs: map[netip.AddrPort]bool{}, log: log}
	for _, cpu := range cpus {
		w := proxy.NewWorker(snap, log, 0)
		l, err := eventloop.New(eventloop.Config{CPU: cpu, Handler: w, Logger: log, MaxConns: cfg.Events.WorkerConnections})
		if err != nil {
			s.Stop()
			return nil, err
		}
		w.SetLoop(l)
		s.loops, s.workers = append(s.loops, l), append(s.workers, w)
	}
	if err := s.listen(cfg, snap); err != nil {
		s.Stop()
		return nil, err
	}
	for _, l := range s.loops {
		if err := l.Start(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// listen opens, on every loop, a listener for each address of snap it lacks.
func (s *Server) listen(cfg *conf.Config, snap *proxy.Snapshot) error {
	for _, a := range snap.Routes.Addrs() {
		if s.addrs[a.Addr] {
			continue
		}
		backlog := backlogOf(cfg, a.Addr)
		for _, l := range s.loops {
			ln, err := eventloop.ListenAddrPort(a.Addr, backlog)
			if err != nil {
				return fmt.Errorf("bind() to %s failed %s", a.Addr, errorlog.Errno(err))
			}
			if err := l.AddListener(ln); err != nil {
				ln.Close()
				return err
			}
		}
		s.addrs[a.Addr] = true
	}
	return nil
}

// backlogOf is the backlog= of the listen directive that sets socket options for addr.
func backlogOf(cfg *conf.Config, addr netip.AddrPort) int {
	for _, srv := range cfg.HTTP.Servers {
		for _, l := range srv.Listens {
			if l.Addr == addr && l.Backlog > 0 {
				return l.Backlog
			}
		}
	}
	return 0
}

// Reload switches every worker to snap and opens listeners for new addresses.
func (s *Server) Reload(cfg *conf.Config, snap *proxy.Snapshot) error {
	if err := s.listen(cfg, snap); err != nil {
		return err
	}
	for _, w := range s.workers {
		if err := w.Reload(snap); err != nil {
			return err
		}
	}
	return nil
}

// Drain stops accepting, lets requests in flight finish and closes idle
// connections; after timeout (0: none) what is left is closed.
func (s *Server) Drain(timeout time.Duration) {
	deadline := time.Now().Add(100 * 365 * 24 * time.Hour)
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for _, l := range s.loops {
		if err := l.Drain(deadline); err != nil && !errors.Is(err, eventloop.ErrLoopClosed) {
			s.log.Error("drain: " + err.Error())
		}
	}
	s.wait()
}

// Stop closes everything now.
func (s *Server) Stop() {
	for _, l := range s.loops {
		l.Stop()
	}
	s.wait()
}

// Loops returns the server's loops.
func (s *Server) Loops() []*eventloop.Loop { return s.loops }

func (s *Server) wait() {
	for _, l := range s.loops {
		<-l.Done()
	}
}
