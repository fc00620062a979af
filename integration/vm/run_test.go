package vm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAvailableSaysWhatIsMissing(t *testing.T) {
	t.Setenv("NUMAPROXY_VM_QEMU", "/nonexistent/qemu-system-x86_64")
	t.Setenv("NUMAPROXY_VM_KERNEL", "/nonexistent/vmlinuz-1.2.3")
	t.Setenv("NUMAPROXY_VM_BUSYBOX", "/nonexistent/busybox")
	err := Available()
	if err == nil {
		t.Fatal("Available() = nil with nothing present")
	}
	for _, w := range []string{"NUMAPROXY_VM_QEMU", "NUMAPROXY_VM_KERNEL", "busybox-static"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Error("Run succeeded without QEMU")
	}
}

// signalWriter calls f once when what it is written contains s.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	s    string
	once sync.Once
	f    func()
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if strings.Contains(w.buf.String(), w.s) {
		w.once.Do(w.f)
	}
	return len(b), nil
}

// TestRunFailures boots guests that do not finish: canceling the context must kill
// QEMU at once and leave no files, and a guest that powers off in the middle of a
// program must be reported as such.
func TestRunFailures(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("QEMU not available: %v", err)
	}
	if testing.Short() {
		t.Skip("boots a VM (seconds under TCG); skipped with -short")
	}
	t.Run("cancel", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		stop := errors.New("test cancels the guest")
		var canceledAt time.Time
		w := &signalWriter{s: "sleeping\n", f: func() { canceledAt = time.Now(); cancel(stop) }}
		res, err := Run(ctx, Config{
			Binary: "/bin/busybox", Args: []string{"sh", "-c", "echo sleeping; sleep 1000"},
			Stream: w, Timeout: 3 * time.Minute,
		})
		if err == nil || !errors.Is(err, stop) {
			t.Fatalf("Run = %v, want an error wrapping %v", err, stop)
		}
		if d := time.Since(canceledAt); d > 15*time.Second {
			t.Errorf("Run returned %v after the cancel", d)
		}
		if !strings.Contains(err.Error(), "program 0 (busybox) was running") {
			t.Errorf("error does not say what was running: %v", err)
		}
		if string(res.Output) != "sleeping\n" || res.Programs[0].ExitCode != -1 {
			t.Errorf("output %q exit code %d", res.Output, res.Programs[0].ExitCode)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("left in TMPDIR: %v", left)
		}
	})
	t.Run("poweroff mid-program", func(t *testing.T) {
		res, err := Run(context.Background(), Config{
			Binary: "/bin/busybox", Args: []string{"sh", "-c", "echo before; poweroff -f"},
			Timeout: 3 * time.Minute,
		})
		if err == nil || !strings.Contains(err.Error(), "guest stopped before /init finished") {
			t.Fatalf("Run = %v, want a guest that stopped early", err)
		}
		if string(res.Output) != "before\n" || res.ExitCode != -1 {
			t.Errorf("output %q exit code %d", res.Output, res.ExitCode)
		}
	})
}
