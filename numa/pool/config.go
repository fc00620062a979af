package pool

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for the zero fields of Config.
const (
	DefaultChunkSize  = 2 << 20
	DefaultMaxBytes   = 256 << 20
	DefaultBatchBytes = 256 << 10
	// DefaultReleaseDelay is how long a free buffer of a domain's reserve stays
	// resident unused before its pages go back to the kernel (jemalloc's
	// default dirty_decay_ms is the same 10 s).
	DefaultReleaseDelay = 10 * time.Second
	// MaxClasses is the largest number of size classes a Config may have.
	MaxClasses = 16
	minClass   = 64
)

// DefaultClasses are the size classes of a zero Config: 4, 16 and 64 KiB.
var DefaultClasses = []int{4 << 10, 16 << 10, 64 << 10}

// Config sizes a Domain. Zero fields take the defaults.
type Config struct {
	// Classes are the buffer sizes in bytes: distinct powers of two from
	// 64 bytes to ChunkSize. Default DefaultClasses.
	Classes []int
	// ChunkSize is what the arena grows by: a power of two, at least a page.
	// Default 2 MiB.
	ChunkSize int
	// MaxBytes caps the domain's arena, rounded down to whole chunks (at
	// least one). Default 256 MiB.
	MaxBytes int64
	// BatchBytes is how much a Local takes from or gives back to the reserve
	// at once: max(1, BatchBytes/size) buffers of a class, at most one
	// chunk's worth. A Local keeps at most two batches per class. Default
	// 256 KiB.
	BatchBytes int
	// ReleaseDelay is how long a free buffer may stay unused in the domain's
	// reserve before its pages are given back to the kernel (madvise
	// MADV_DONTNEED, from a goroutine of the domain, never from Get or Put).
	// The buffer stays in the pool; the arena keeps its node binding, so pages
	// faulted in again come from the same node. Buffers on the Locals' free
	// lists, at most two batches per class, are the loops' warm reserve and
	// stay resident. Negative keeps everything resident. Default
	// DefaultReleaseDelay.
	ReleaseDelay time.Duration
}

// class is one size class as the pool uses it.
type class struct {
	size  int
	batch int // buffers moved per refill or flush
	high  int // a Local's free-list capacity for the class
}

func (c Config) normalize() (Config, []class, error) {
	if len(c.Classes) == 0 {
		c.Classes = DefaultClasses
	}
	c.Classes = slices.Clone(c.Classes)
	slices.Sort(c.Classes)
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.ReleaseDelay == 0 {
		c.ReleaseDelay = DefaultReleaseDelay
	}
	if c.ChunkSize < unix.Getpagesize() || bits.OnesCount(uint(c.ChunkSize)) != 1 {
		return c, nil, fmt.Errorf("chunk size %d is not a power of two of at least a page", c.ChunkSize)
	}
	if len(c.Classes) > MaxClasses {
		return c, nil, fmt.Errorf("%d size classes, at most %d", len(c.Classes), MaxClasses)
	}
	if c.MaxBytes < int64(c.ChunkSize) {
		return c, nil, fmt.Errorf("cap %d bytes is less than one chunk (%d)", c.MaxBytes, c.ChunkSize)
	}
	if c.BatchBytes < 0 {
		return c, nil, fmt.Errorf("negative batch size %d", c.BatchBytes)
	}
	c.MaxBytes -= c.MaxBytes % int64(c.ChunkSize)
	cls := make([]class, len(c.Classes))
	for i, s := range c.Classes {
		if s < minClass || s > c.ChunkSize || bits.OnesCount(uint(s)) != 1 {
			return c, nil, fmt.Errorf("size class %d is not a power of two from %d to the chunk size %d", s, minClass, c.ChunkSize)
		}
		if i > 0 && s == c.Classes[i-1] {
			return c, nil, fmt.Errorf("size class %d given twice", s)
		}
		batch := min(max(1, c.BatchBytes/s), c.ChunkSize/s)
		cls[i] = class{size: s, batch: batch, high: 2 * batch}
	}
	return c, cls, nil
}
