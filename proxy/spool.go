package proxy

// A request body read whole (httpcore.BufferBody) that went to a temporary file is
// sent from it on each try: read into pool buffers as the upstream socket takes them.

// fileSendChunk is how much of a spooled body is read for one write upstream.
const fileSendChunk = 64 << 10

// While a spooled body is sent, any byte left queued on the upstream connection
// stops reading the file until the queue is empty: the socket buffer holds what
// waits, not pool buffers.
const fileHighWater, fileLowWater = 1, 0

// filePending reports a spooled body not yet wholly sent on the current connection.
func (ex *exchange) filePending() bool { return ex.file.IsOpen() && ex.fileSent < ex.file.Size() }

// sendFile sends the spooled body on from where it stopped while the upstream socket
// takes it; OnWritable brings it back for the rest. It reports false when it failed
// and answered the client.
func (ex *exchange) sendFile() bool {
	if !ex.filePending() || ex.conn == nil || (ex.state != exHead && ex.state != exBody) {
		return true
	}
	conn := ex.conn
	if ex.fileSent == 0 {
		conn.SetWriteWatermarks(fileHighWater, fileLowWater)
	}
	pool := ex.st.pool()
	buf := pool.Get(fileSendChunk)
	for {
		n := int(min(int64(len(buf)), ex.file.Size()-ex.fileSent))
		if err := ex.file.ReadAt(buf[:n], ex.fileSent); err != nil {
			pool.Put(buf)
			ex.st.log.Error(err.Error(), "upstream", ex.peer.String(), "client", ex.r.RemoteAddr().String())
			r := ex.r
			ex.Abort()
			r.DisableKeepAlive()
			r.Fail(500)
			return false
		}
		ex.fileSent += int64(n)
		ex.try().sent += int64(n)
		ex.bodySent = true
		if _, err := conn.Write(buf[:n]); err != nil {
			break // the loop closes the connection; OnClose goes on from there
		}
		if !ex.filePending() {
			conn.SetWriteWatermarks(0, 0)
			break
		}
		if conn.Queued() > fileHighWater {
			break
		}
	}
	pool.Put(buf)
	if !ex.filePending() {
		ex.armRead() // proxy_read_timeout runs from the end of the request
	}
	return true
}
