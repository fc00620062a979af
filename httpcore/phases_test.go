package httpcore

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

// probeKey is the probe module's request context: the phases its handlers saw.
var probeKey = NewKey()

type probeTrace struct{ phases []string }

// probe is a test module: a handler in every phase a module may use that notes its
// phase, answers 403 in the access phase for /deny, declines the content phase for
// /none (so the core answers 404), and answers with the trace otherwise; a header
// filter that adds X-Probe and a body filter that upper-cases. It has a directive,
// probe, that makes a location's content handler its own.
var probe = &conf.Module{
	Name: "probe",
	Directives: []conf.Directive{{Name: "probe", Contexts: conf.LocationCtx, Args: conf.Args0,
		Set: func(c *conf.Cursor, s *conf.Stmt) error {
			return SetContentHandler(c, s, func(r *Request) Status {
				note(r, "location content")
				return answerTrace(r)
			}, false)
		}}},
	Ctx: &Hooks{Key: probeKey, Init: func(s *Setup) error {
		for _, p := range []Phase{PostReadPhase, ServerRewritePhase, RewritePhase, PreaccessPhase, AccessPhase, PrecontentPhase} {
			name := p.String()
			s.AddHandler(p, func(r *Request) Status {
				note(r, name)
				switch {
				case p == AccessPhase && string(r.URI()) == "/deny":
					return 403
				case p == PreaccessPhase:
					return OK // the next phase at once: the second preaccess handler does not run
				}
				return Declined
			})
		}
		s.AddHandler(PreaccessPhase, func(r *Request) Status { note(r, "second preaccess"); return Declined })
		s.AddHandler(ContentPhase, func(r *Request) Status {
			note(r, "content")
			switch string(r.URI()) {
			case "/none":
				return Declined
			case "/later":
				// Answered from a loop task, without reading the body: the core
				// drops it once the answer is finished.
				r.Worker().Loop().Run(func() {
					h := r.NewHeader()
					h.Status, h.ContentLength = 200, 5
					h.Add([]byte("Content-Type"), []byte("text/plain"))
					r.SendHeader()
					r.SendBody([]byte("later"), true)
					r.Finish()
				})
				return Done
			}
			return answerTrace(r)
		})
		s.AddHandler(LogPhase, func(r *Request) Status { logged++; return OK })
		s.AddHeaderFilter(func(nextHeader HeaderFilter) HeaderFilter {
			return func(r *Request) {
				h := r.Header()
				h.Add([]byte("X-Probe"), []byte("1"))
				nextHeader(r)
			}
		})
		s.AddBodyFilter(func(nextBody BodyFilter) BodyFilter {
			return func(r *Request, out *Out) {
				if len(out.Data) > 0 {
					upper := bytes.ToUpper(out.Data)
					out.Data = upper
				}
				nextBody(r, out)
			}
		})
		return nil
	}},
}

// logged counts log phase runs (the loop runs them; the test reads after replies).
var logged int

func note(r *Request, phase string) {
	t, _ := r.Ctx(probeKey).(*probeTrace)
	if t == nil {
		t = &probeTrace{}
		r.SetCtx(probeKey, t)
	}
	if phase == PostReadPhase.String() {
		t.phases = t.phases[:0] // a new request: the context is kept across reuse
	}
	t.phases = append(t.phases, phase)
}

func answerTrace(r *Request) Status {
	t := r.Ctx(probeKey).(*probeTrace)
	r.SendText(200, nil, []byte(strings.Join(t.phases, ",")))
	return Done
}

// TestPhasesAndFilters runs requests through a module that has a handler in every
// phase and a filter in each chain, on a real loop.
func TestPhasesAndFilters(t *testing.T) {
	srv := serveWith(t, conf.MustRegistry(Module, probe), "server { listen ADDR; location / { } location /own { probe; } }")
	const before = "POST-READ,SERVER REWRITE,REWRITE,PREACCESS,ACCESS,PRECONTENT"
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/x", before + ",CONTENT", 200},
		{"/own", before + ",LOCATION CONTENT", 200},
		{"/deny", "<HTML>", 403},
		{"/none", "<HTML>", 404},
	} {
		resp, body := srv.get(tc.path)
		if resp.StatusCode != tc.status || !strings.HasPrefix(body, tc.body) || resp.Header.Get("X-Probe") != "1" {
			t.Errorf("%s: %d %q %v, want %d %q and X-Probe", tc.path, resp.StatusCode, body, resp.Header, tc.status, tc.body)
		}
	}
	// A body the handler did not read is not taken for the next request.
	smuggled := "GET /none HTTP/1.1\r\nHost: a\r\n\r\n"
	io.WriteString(srv.c, "POST /later HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len(smuggled))+"\r\n\r\n"+smuggled+"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"LATER", before + ",CONTENT"} {
		resp, err := http.ReadResponse(srv.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != want || resp.Close {
			t.Errorf("%d %q close=%v, want 200 %q", resp.StatusCode, body, resp.Close, want)
		}
	}
	if ran := make(chan int); srv.l.Run(func() { ran <- logged }) == nil {
		if n := <-ran; n != 6 {
			t.Errorf("the log phase ran %d times for 6 requests", n)
		}
	}
}

// TestUnusedModuleCostsNothing: a module whose Init adds nothing leaves the engine and
// the chains as the core's alone.
func TestUnusedModuleCostsNothing(t *testing.T) {
	idle := &conf.Module{Name: "idle", Ctx: &Hooks{Init: func(*Setup) error { return nil }}}
	cfg := mustConfWith(t, conf.MustRegistry(Module, idle), "http { server { location / { } } }")
	snap, err := NewSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.engine) != 4 || snap.all.bodyFilters || len(snap.logHandlers) != 0 {
		t.Errorf("engine %+v, body filters %v", snap.engine, snap.all.bodyFilters)
	}
}

func mustConfWith(t testing.TB, reg *conf.Registry, src string) *conf.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.conf")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(conf.Options{Registry: reg, Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
