package authbasic

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/eventloop"
)

// startLoop runs a real event loop (pinned to cpu, -1 for none) until the test ends.
// holdP is how the server runs its loops: each keeps a P of its own (and eventloop
// raises GOMAXPROCS for it).
func startLoop(t testing.TB, cpu int, holdP bool) *eventloop.Loop {
	t.Helper()
	l, err := eventloop.New(eventloop.Config{CPU: cpu, HoldP: holdP})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Stop()
		<-l.Done()
	})
	return l
}

// checkOn runs Check on the loop's thread and waits for the final outcome.
func checkOn(t testing.TB, l *eventloop.Loop, c *Checker, a *Attempt, lc *LocConf, authorization []byte) Outcome {
	t.Helper()
	res := make(chan Outcome, 1)
	done := func(a *Attempt) { res <- a.Outcome }
	if err := l.Run(func() {
		if o := c.Check(a, lc, authorization, done); o != Pending {
			res <- o
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-res:
		return o
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
	}
	return 0
}

func basic(user, password string) []byte {
	return []byte("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

// locConf is what the directives make of auth_basic realm and a user file.
func locConf(realm, path string) *LocConf {
	return &LocConf{Realm: realm, realmSet: true, Challenge: AppendChallenge(nil, realm), File: &UserFile{Path: path}}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
