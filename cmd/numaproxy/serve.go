package main

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

// server is the running data path: one event loop per CPU, each with its proxy
// worker and its own listener on every address.
type server struct {
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

// startServer builds the loops and listeners of cfg and starts them.
func startServer(cfg *conf.Config, snap *proxy.Snapshot, log *slog.Logger) (*server, error) {
	cpus, err := loopCPUs(cfg.Main)
	if err != nil {
		return nil, err
	}
	runtime.GOMAXPROCS(numa.GOMAXPROCS(len(cpus)))
	s := &server{addrs: map[netip.AddrPort]bool{}, log: log}
	for _, cpu := range cpus {
		w := proxy.NewWorker(snap, log, 0)
		l, err := eventloop.New(eventloop.Config{CPU: cpu, Handler: w, Logger: log, MaxConns: cfg.Events.WorkerConnections})
		if err != nil {
			s.stop()
			return nil, err
		}
		w.SetLoop(l)
		s.loops, s.workers = append(s.loops, l), append(s.workers, w)
	}
	if err := s.listen(cfg, snap); err != nil {
		s.stop()
		return nil, err
	}
	for _, l := range s.loops {
		if err := l.Start(); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// listen opens, on every loop, a listener for each address of snap it lacks.
func (s *server) listen(cfg *conf.Config, snap *proxy.Snapshot) error {
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

// reload switches every worker to snap and opens listeners for new addresses.
func (s *server) reload(cfg *conf.Config, snap *proxy.Snapshot) error {
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

// drain stops accepting, lets requests in flight finish and closes idle
// connections; after timeout (0: none) what is left is closed.
func (s *server) drain(timeout time.Duration) {
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

// stop closes everything now.
func (s *server) stop() {
	for _, l := range s.loops {
		l.Stop()
	}
	s.wait()
}

func (s *server) wait() {
	for _, l := range s.loops {
		<-l.Done()
	}
}
