package eventloop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const emfileChildEnv = "EVENTLOOP_EMFILE_CHILD"

// emfileChild runs in a re-executed test binary with RLIMIT_NOFILE at 64: an
// echo loop whose listener address goes to stdout; each line on stdin asks for
// the loop's stats; stdin EOF stops it.
func emfileChild() int {
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	l, err := New(Config{CPU: -1, Handler: echoHandler()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := Listen("127.0.0.1:0", 1024)
	if err == nil {
		err = l.AddListener(ln)
	}
	if err == nil {
		err = l.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		s := l.Stats()
		fmt.Printf("accepted=%d conns=%d stops=%d\n", s.Accepted, s.Conns, s.AcceptStops)
	}
	_ = l.Stop()
	<-l.Done()
	return 0
}

func TestAcceptSurvivesEMFILE(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewScanner(stdoutPipe)
	if !out.Scan() {
		t.Fatalf("child gave no address; stderr: %s", stderr.String())
	}
	addr := out.Text()
	stats := func() (accepted, conns, stops int) {
		if _, err := io.WriteString(stdin, "stats\n"); err != nil || !out.Scan() {
			t.Fatalf("child stats: %v; stderr: %s", err, stderr.String())
		}
		if _, err := fmt.Sscanf(out.Text(), "accepted=%d conns=%d stops=%d", &accepted, &conns, &stops); err != nil {
			t.Fatal(err)
		}
		return
	}

	// Far more connections than the child has fds: the kernel completes the
	// handshakes; the child accepts until EMFILE and leaves the rest queued.
	const total = 100
	conns := make([]net.Conn, total)
	for i := range conns {
		conns[i] = dial(t, addr)
		defer conns[i].Close()
	}
	var accepted, stops int
	waitFor(t, "the child to run out of fds", func() bool { accepted, _, stops = stats(); return stops > 0 })
	if accepted >= total {
		t.Fatalf("accepted %d of %d under a 64 fd limit", accepted, total)
	}
	// Accept order is connect order: the first `accepted` are served, and the loop still answers.
	if got := roundTrip(t, conns[0], "alive"); got != "alive" {
		t.Fatalf("echo %q", got)
	}
	// Free some fds: the queued connections get accepted and served.
	const freed = 10
	for _, c := range conns[:freed] {
		_ = c.Close()
	}
	waitFor(t, "accepts to resume", func() bool { a, _, _ := stats(); return a >= accepted+freed })
	for _, c := range conns[accepted : accepted+freed] {
		if got := roundTrip(t, c, "served"); got != "served" {
			t.Fatalf("echo %q", got)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	waitFor(t, "every connection accepted and closed", func() bool { a, n, _ := stats(); return a == total && n == 0 })
	_ = stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("child did not exit")
	}
	// One log line per burst of failures, however many retries it took.
	if n := strings.Count(stderr.String(), "accept failed"); n < 1 || n > 3 {
		t.Errorf("%d accept failure logs, want 1 per burst; stderr:\n%s", n, stderr.String())
	}
	t.Logf("child accepted %d before EMFILE; %d listener stops", accepted, stops)
}
