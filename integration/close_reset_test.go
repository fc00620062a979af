package integration

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestCloseAnswerBeforePipelinedReset: a client pipelines requests behind one with
// "Connection: close", each in a write of its own. The server answers the first
// and closes; input that came after its last read makes the close a reset, but
// the answer went out before it and the client reads it, from nginx as from
// numaproxy. (numaproxy lost 77 of 900 answers so when the last answer waited in
// the socket for the FIN of close(2): the reset dropped it.)
func TestCloseAnswerBeforePipelinedReset(t *testing.T) {
	srvs := bothServers(t, `server { listen %[1]s; location / { return 200 ok; } }`, "")
	for _, s := range srvs {
		lost := 0
		const n = 300
		for range n {
			c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			done := make(chan struct{})
			go func() {
				defer close(done)
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); err != nil {
					return
				}
				for range 1000 {
					if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
						return
					}
				}
			}()
			data, _ := io.ReadAll(c)
			if !strings.HasPrefix(string(data), "HTTP/1.1 200") {
				lost++
			}
			c.Close()
			<-done
		}
		if lost > 0 {
			t.Errorf("%s: %d of %d answers lost", s.name, lost, n)
		}
	}
}
