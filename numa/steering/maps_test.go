package steering

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/numa"
)

// TestConntrackMapsOnNode: each node's inner LRU maps are created with
// BPF_F_NUMA_NODE and installed at that node's index of the outer maps.
func TestConntrackMapsOnNode(t *testing.T) {
	cfg := simulatedConfig()
	cfg.ConntrackEntries = 1000
	s := load(t, cfg)
	if got := s.ConntrackNodes(); !slices.Equal(got, []int{0}) {
		t.Fatalf("conntrack nodes %v, want [0]", got)
	}
	for name, pair := range map[string]struct {
		outer *ebpf.Map
		inner *ebpf.Map
	}{
		"clients": {s.objs.CtClients, s.clients[0]},
		"flows":   {s.objs.CtFlows, s.flows[0]},
	} {
		info, err := pair.inner.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Type != ebpf.LRUHash || info.MaxEntries != 1000 || info.Flags&unix.BPF_F_NUMA_NODE == 0 {
			t.Errorf("%s map on node 0: type %s, %d entries, flags %#x; want LRU hash, 1000, BPF_F_NUMA_NODE",
				name, info.Type, info.MaxEntries, info.Flags)
		}
		id, _ := info.ID()
		var got uint32
		if err := pair.outer.Lookup(uint32(0), &got); err != nil {
			t.Fatal(err)
		}
		if ebpf.MapID(got) != id {
			t.Errorf("outer %s map holds map %d at node 0, want %d", name, got, id)
		}
	}
}

// TestConntrackNodeReallyPassed: a node that does not exist makes map
// creation fail with EINVAL, which shows the node reaches the kernel (without
// BPF_F_NUMA_NODE the kernel would ignore it).
func TestConntrackNodeReallyPassed(t *testing.T) {
	topo, err := numa.ReadTopology(numa.DefaultSysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	bad := topo.Nodes[len(topo.Nodes)-1].ID + 1
	if bad >= MaxNodes {
		t.Skipf("no node number below %d is free", MaxNodes)
	}
	cfg := simulatedConfig()
	cfg.DomainNode = []int{0, bad}
	s, err := Load(cfg)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err == nil {
		s.Close()
		t.Fatalf("Load with a domain on node %d succeeded", bad)
	}
	// The map creation, not the program, must be what failed.
	var ve *ebpf.VerifierError
	if !errors.Is(err, unix.EINVAL) || errors.As(err, &ve) || !strings.Contains(err.Error(), "conntrack map on node") {
		t.Fatalf("Load with a domain on node %d: %v, want EINVAL creating its conntrack map", bad, err)
	}
	t.Logf("domain on non-existent node %d: %v", bad, err)
}

// dialFrom makes one connection from src (a 127/8 address) on cpu, sends
// data, and returns the client fd.
func dialFrom(t *testing.T, cpu int, src [4]byte, port int, data []byte) int {
	t.Helper()
	fd := -1
	onCPU(t, cpu, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src}); err != nil {
			return err
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
			return err
		}
		if len(data) > 0 {
			_, err = unix.Write(fd, data)
		}
		return err
	})
	t.Cleanup(func() {
		unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(fd)
	})
	return fd
}

// sendRawTCP sends one bare TCP segment with flags from src:sport to
// 127.0.0.1:dport on cpu, through a raw socket.
func sendRawTCP(t *testing.T, cpu int, src [4]byte, sport, dport uint16, flags byte) {
	t.Helper()
	dst := [4]byte{127, 0, 0, 1}
	seg := make([]byte, 20)
	binary.BigEndian.PutUint16(seg[0:], sport)
	binary.BigEndian.PutUint16(seg[2:], dport)
	binary.BigEndian.PutUint32(seg[4:], 1000)
	binary.BigEndian.PutUint32(seg[8:], 2000)
	seg[12] = 5 << 4
	seg[13] = flags
	binary.BigEndian.PutUint16(seg[14:], 1024)
	pseudo := append(append(append([]byte{}, src[:]...), dst[:]...), 0, unix.IPPROTO_TCP, 0, 20)
	binary.BigEndian.PutUint16(seg[16:], checksum(append(pseudo, seg...)))
	onCPU(t, cpu, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src}); err != nil {
			return err
		}
		return unix.Sendto(fd, seg, 0, &unix.SockaddrInet4{Addr: dst})
	})
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

func findClient(t *testing.T, s *Steering, node int, addr netip.Addr) (Client, bool) {
	t.Helper()
	cs, err := s.Clients(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Addr == addr {
			return c, true
		}
	}
	return Client{}, false
}

// TestConntrackCountsSYNsOnly: a stray ACK and a RST reach the program (it
// steers every packet a listener lookup sees) but are not counted; a
// connection that sends data counts exactly one SYN, on the arrival domain.
func TestConntrackCountsSYNsOnly(t *testing.T) {
	needCPUs(t)
	s := load(t, simulatedConfig())
	ls := twoDomains(t, s)
	src := [4]byte{127, 0, 0, 9}
	addr := netip.AddrFrom4(src)
	if _, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP); err != nil {
		t.Skipf("raw sockets: %v", err)
	}
	sendRawTCP(t, 0, src, 5555, uint16(ls[0].port), 0x10) // ACK
	sendRawTCP(t, 0, src, 5556, uint16(ls[0].port), 0x04) // RST
	for end := time.Now().Add(deadline); stat(t, s, 0).NotSYN < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("program saw %d non-SYN packets, want 2", stat(t, s, 0).NotSYN)
		}
	}
	if c, ok := findClient(t, s, 0, addr); ok {
		t.Fatalf("ACK and RST counted: %+v", c)
	}

	before := time.Duration(monotonic(t))
	fd := dialFrom(t, 0, src, ls[0].port, make([]byte, 100))
	got := acceptN(t, 1, ls...)
	if len(got[0]) != 1 {
		t.Fatalf("connection from CPU 0 not on domain 0's listener")
	}
	buf := make([]byte, 200)
	n := 0
	for n < 100 {
		m, err := unix.Read(got[0][0].fd, buf[n:])
		if err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
		n += max(m, 0)
	}
	_ = fd
	c, ok := findClient(t, s, 0, addr)
	if !ok || !slices.Equal(c.SYNs, []uint32{1, 0}) {
		t.Fatalf("client %v after a connection with data: %+v (found %v), want SYNs [1 0]", addr, c, ok)
	}
	if c.LastSeen < before || c.LastSeen > time.Duration(monotonic(t)) {
		t.Errorf("last seen %v outside [%v, now]", c.LastSeen, before)
	}
	if st := stat(t, s, 0); st.NotSYN != 2 || st.Selected != 3 {
		t.Errorf("domain 0 stats %+v, want 2 non-SYN and 3 selected", st)
	}
	dom, ok, err := s.FlowDomain(got[0][0].client, got[0][0].server)
	if err != nil || !ok || dom != 0 {
		t.Errorf("flow %v -> %v: domain %d, %v, %v; want 0", got[0][0].client, got[0][0].server, dom, ok, err)
	}
	t.Logf("client %v: SYNs %v after ACK, RST and one connection with 100 bytes", addr, c.SYNs)
}

func monotonic(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestConntrackLRUEviction: more clients than entries; the maps stay within
// their size, keep the newest client and evict the oldest.
func TestConntrackLRUEviction(t *testing.T) {
	needCPUs(t)
	const entries, clients = 64, 300
	cfg := simulatedConfig()
	cfg.ConntrackEntries = entries
	s := load(t, cfg)
	ls := twoDomains(t, s)
	var first, last conn
	for i := range clients {
		src := [4]byte{127, 1, byte(i >> 8), byte(i + 1)}
		dialFrom(t, 0, src, ls[0].port, nil)
		c := acceptN(t, 1, ls...)[0][0]
		if i == 0 {
			first = c
		}
		last = c
		unix.Close(c.fd)
	}
	cs, err := s.Clients(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d clients into %d entries: %d client entries left", clients, entries, len(cs))
	if len(cs) == 0 || len(cs) > entries {
		t.Errorf("%d client entries, want 1 to %d", len(cs), entries)
	}
	if n, err := s.ClientCount(0); err != nil || n != len(cs) {
		t.Errorf("ClientCount %d, %v; want %d", n, err, len(cs))
	}
	if _, ok := findClient(t, s, 0, last.client.Addr()); !ok {
		t.Errorf("newest client %v evicted", last.client.Addr())
	}
	if _, ok := findClient(t, s, 0, first.client.Addr()); ok {
		t.Errorf("oldest client %v kept", first.client.Addr())
	}
	if _, ok, _ := s.FlowDomain(first.client, first.server); ok {
		t.Errorf("oldest flow %v kept", first.client)
	}
	if d, ok, _ := s.FlowDomain(last.client, last.server); !ok || d != 0 {
		t.Errorf("newest flow %v: domain %d, %v", last.client, d, ok)
	}
}
