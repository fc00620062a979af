package proxy

import (
	"github.com/numaproxy/numaproxy/static"
	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/httpcore"
)

// A buffered response (proxy_buffering on) to a client that reads slower than the
// upstream sends holds up to proxy_buffers in memory (the client connection's write
// watermarks), then goes on to an unlinked temporary file in proxy_temp_path, as
// nginx's does, so that the upstream connection is read to its end and freed (or
// cached) without waiting for the client. The client is fed from the file a slice at
// a time as its socket drains: one queued file segment at a time, so one descriptor.
// Once the file reaches proxy_max_temp_file_size the upstream is read only as fast as
// the file drains; once the client caught up with the file, bytes go straight to it
// again. Writes to the file run on the loop, as the request body's spool does (see
// httpcore's bodyfile.go for what that waits for).

// spillSlice is how much of the file one queued segment covers: about the loop's write
// high watermark, so the client connection blocks once per slice.
const spillSlice = 256 << 10

// responseSpill is the temporary file of one response.
type responseSpill struct {
	fd      int
	open    bool  // fd is the file
	written int64 // bytes in the file
	sent    int64 // bytes of the file queued to the client
	active  bool  // the response goes to the file (the client has not caught up)
	full    bool  // proxy_max_temp_file_size reached: the upstream waits for the file to drain
}

// spillable: the response may go on to a temporary file.
func (ex *exchange) spillable() bool {
	return ex.respBuffered && ex.lc.MaxTempFileSize > 0 && ex.state == exBody
}

// deliver passes response body bytes on: to the client, or to the file while the
// response spills.
func (ex *exchange) deliver(p []byte) {
	if ex.ck != nil {
		ex.cacheWrite(p)
	}
	if !ex.spill.active {
		ex.r.SendBody(p, false)
		return
	}
	sp := &ex.spill
	if !sp.open {
		fd, err := httpcore.OpenTempFile(ex.lc.TempPath.Dir)
		if err != nil {
			ex.spillFailed(err, p)
			return
		}
		sp.fd, sp.open = fd, true
		ex.st.log.Warn("an upstream response is buffered to a temporary file", "path", ex.lc.TempPath.Dir, "upstream", ex.peer.String())
	}
	for b := p; len(b) > 0; {
		n, err := unix.Pwrite(sp.fd, b, sp.written)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			ex.spillFailed(err, b)
			return
		}
		sp.written += int64(n)
		b = b[n:]
	}
	if sp.written >= ex.lc.MaxTempFileSize && !sp.full && ex.conn != nil {
		sp.full = true
		ex.conn.PauseRead()
	}
	ex.drainSpill()
}

// spillFailed: the file cannot take the response (no space, no directory): what is
// left of p goes to the client's queue behind the file, and the upstream is read
// only as fast as the client takes it from now on.
func (ex *exchange) spillFailed(err error, p []byte) {
	ex.st.log.Error("writing a buffered response to a temporary file failed: "+err.Error(), "path", ex.lc.TempPath.Dir)
	ex.respBuffered = false
	if !ex.spill.open || ex.spill.sent == ex.spill.written {
		ex.spill.active = false
		ex.r.SendBody(p, false)
		return
	}
	// The file's unsent part must go first: the client gets it, then p, in order,
	// from memory (bounded by what the upstream sent in this read).
	ex.spillPending = append(ex.spillPending[:0], p...)
	if ex.conn != nil {
		ex.conn.PauseRead()
	}
}

// drainSpill queues the file to the client while its connection takes it; once the
// client caught up, the response goes straight to it again, and a response whose
// upstream part ended finishes.
func (ex *exchange) drainSpill() {
	sp := &ex.spill
	r := ex.r
	static.UseSendfile(r)
	for !ex.clientBlocked && sp.sent < sp.written {
		n := min(sp.written-sp.sent, spillSlice)
		r.SendFile(sp.fd, sp.sent, n, false)
		sp.sent += n
		if ex.state == exDone {
			return // the client failed while it was fed
		}
	}
	if sp.sent < sp.written || !sp.active {
		return
	}
	if ex.clientBlocked && !ex.upstreamDone {
		// All of the file is queued, but the client has not taken it: what comes
		// next goes to the file too.
		return
	}
	sp.active = false
	if len(ex.spillPending) > 0 {
		r.SendBody(ex.spillPending, false)
		ex.spillPending = ex.spillPending[:0]
	}
	if sp.full || !ex.respBuffered {
		sp.full = false
		if ex.conn != nil && ex.state == exBody {
			ex.conn.ResumeRead()
		}
	}
	if ex.upstreamDone {
		ex.finishResponse()
	}
}

// finishResponse ends the client's response once the upstream part is over and the
// file drained.
func (ex *exchange) finishResponse() {
	r := ex.r
	r.SendBody(nil, true)
	ex.end()
	if r.ReadingBody() {
		r.DisableKeepAlive()
	}
	r.Finish()
}

// closeSpill closes the exchange's descriptor of the file; the segments still queued
// on the client connection hold their own.
func (ex *exchange) closeSpill() {
	if ex.spill.open {
		unix.Close(ex.spill.fd)
	}
	ex.spill = responseSpill{}
}
