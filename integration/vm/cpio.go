package vm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// CPIOWriter writes a cpio archive in the "newc" format the kernel unpacks into its
// initramfs (see the kernel's Documentation/driver-api/early-userspace/buffer-format.rst).
type CPIOWriter struct {
	w      io.Writer
	n      int64 // bytes written so far, for padding
	ino    uint32
	closed bool
	err    error
}

// NewCPIOWriter returns a writer of a newc archive to w.
func NewCPIOWriter(w io.Writer) *CPIOWriter { return &CPIOWriter{w: w, ino: 300000} }

// Dir adds a directory entry; parents must be added first.
func (c *CPIOWriter) Dir(name string, perm fs.FileMode) error {
	return c.entry(name, 0o040000|uint32(perm.Perm()), nil)
}

// File adds a regular file with the given contents and permissions.
func (c *CPIOWriter) File(name string, perm fs.FileMode, data []byte) error {
	return c.entry(name, 0o100000|uint32(perm.Perm()), data)
}

// Symlink adds a symbolic link name pointing to target.
func (c *CPIOWriter) Symlink(name, target string) error {
	return c.entry(name, 0o120000|0o777, []byte(target))
}

// Close writes the trailer and pads the archive to a multiple of 512 bytes, which
// also keeps it 4-byte aligned for concatenation with other archives.
func (c *CPIOWriter) Close() error {
	if c.closed {
		return c.err
	}
	if err := c.entry("TRAILER!!!", 0, nil); err != nil {
		return err
	}
	c.closed = true
	if pad := (512 - c.n%512) % 512; pad > 0 {
		c.write(make([]byte, pad))
	}
	return c.err
}

func (c *CPIOWriter) entry(name string, mode uint32, data []byte) error {
	if c.closed {
		return errors.New("cpio: write after Close")
	}
	if c.err != nil {
		return c.err
	}
	if name == "" || name[0] == '/' {
		return fmt.Errorf("cpio: name %q must be relative and non-empty", name)
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	// 13 fields after the magic: ino mode uid gid nlink mtime filesize devmajor
	// devminor rdevmajor rdevminor namesize check.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad4()
	c.write(data)
	c.pad4()
	return c.err
}

func (c *CPIOWriter) pad4() {
	if p := (4 - c.n%4) % 4; p > 0 {
		c.write(make([]byte, p))
	}
}

func (c *CPIOWriter) write(b []byte) {
	if c.err != nil || len(b) == 0 {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil {
		c.err = fmt.Errorf("cpio: %w", err)
	}
}
