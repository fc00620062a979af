package eventloop

import (
	"log/slog"
	"time"
)

// Config describes one loop. Zero fields take the defaults noted.
type Config struct {
	// CPU is the CPU the loop's thread is pinned to; -1 leaves it unpinned.
	CPU int
	// Handler serves accepted connections.
	Handler Handler
	// OnStart runs on the loop's locked, pinned thread before it polls (for
	// per-thread settings such as the NUMA memory policy); an error fails Start.
	OnStart func(*Loop) error
	// Logger receives the loop's logs; default slog.Default().
	Logger *slog.Logger
	// Pool lends the loop's read buffer and connections' output buffers;
	// default a new HeapPool per loop.
	Pool BufferPool
	// ReadBufferSize is the size of the loop's scratch read buffer; default 64 KiB.
	ReadBufferSize int
	// ChunkSize is the size of the buffers queued output is copied into; default 16 KiB.
	ChunkSize int
	// WriteHighWater is the queued output above which OnWriteBlocked runs; default 256 KiB.
	WriteHighWater int
	// WriteLowWater is the queued output at or below which OnWritable runs; default 64 KiB.
	WriteLowWater int
	// NoSendfile makes connections read file segments (Conn.WriteFile) into pool
	// buffers instead of sending them with sendfile(2): nginx's "sendfile off".
	// Conn.SetSendfile changes it per connection.
	NoSendfile bool
	// SendfileMaxChunk bounds the file bytes a connection sends per readiness
	// event, so one fast reader of a large file does not hold the loop (nginx's
	// sendfile_max_chunk); default 2 MiB, negative for no bound.
	SendfileMaxChunk int
	// MaxConns bounds the connections (accepted and dialled) the loop keeps open,
	// nginx's worker_connections: at the bound the loop closes its oldest idle
	// connections to accept a new one, or, with none idle, stops accepting until
	// one closes. Dialling is not held back. 0 means no bound.
	MaxConns int
	// HoldP makes the loop wait for events without giving its P back to the Go
	// scheduler (see poll.go): cheaper wake-ups, but each loop then needs a P of its
	// own, so GOMAXPROCS must be larger than the number of HoldP loops.
	HoldP bool
	// AcceptRetry is how long a listener stays unpolled at MaxConns or after
	// accept failed (for lack of fds with no idle connection to close, or of
	// memory), unless a connection of the loop closes first; default 100ms.
	AcceptRetry time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Pool == nil {
		c.Pool = NewHeapPool()
	}
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = 64 << 10
	}
	if c.ChunkSize <= 0 {
		c.ChunkSize = 16 << 10
	}
	if c.WriteHighWater <= 0 {
		c.WriteHighWater = 256 << 10
	}
	if c.WriteLowWater <= 0 || c.WriteLowWater > c.WriteHighWater {
		c.WriteLowWater = min(64<<10, c.WriteHighWater/4)
	}
	if c.SendfileMaxChunk == 0 {
		c.SendfileMaxChunk = defaultSendfileMaxChunk
	}
	if c.AcceptRetry <= 0 {
		c.AcceptRetry = 100 * time.Millisecond
	}
}
