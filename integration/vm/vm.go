package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Program is a static x86-64 Linux executable to run in the guest.
type Program struct {
	Binary string   // host path; must be statically linked (CGO_ENABLED=0)
	Args   []string // arguments after the program name
	Env    []string // NAME=value, added to Config.Env for this program
	Dir    string   // guest working directory, created if missing; default "/"
}

// Config describes one boot of the guest.
type Config struct {
	Binary string   // program to run (shorthand for a first entry of Programs)
	Args   []string // its arguments
	// Programs run after Binary, one after another in the same boot; each one's exit
	// code is reported separately and a failure does not stop the next.
	Programs []Program

	Nodes        int // NUMA nodes; default 2
	CPUsPerNode  int // CPUs (one socket) per node; default 2
	MemPerNodeMB int // memory per node; default 512

	Timeout    time.Duration     // for the whole boot; default 3 minutes
	ExtraFiles map[string]string // guest path -> host file or directory (copied recursively)
	Env        []string          // NAME=value for every program
	// Modules are kernel modules loaded (with busybox modprobe, after depmod)
	// before the programs run, taken with their dependencies from the host's
	// /lib/modules/<kernel version>: e.g. "tls" for kTLS.
	Modules    []string
	KernelArgs []string // appended to the kernel command line

	// Accel is "tcg", "kvm", or "" (default; also $NUMAPROXY_VM_ACCEL) for KVM only
	// when a probe boot with it succeeds, else TCG.
	Accel string
	// Stream, when set, receives the programs' output as it arrives.
	Stream io.Writer
}

// ProgramResult is what one program did in the guest.
type ProgramResult struct {
	Binary   string
	Output   []byte // stdout and stderr, interleaved as written
	ExitCode int    // -1 when the program never finished
	Duration time.Duration
}

// Result is what a boot produced.
type Result struct {
	Output   []byte // every program's output (and modprobe's), in order
	ExitCode int    // the first non-zero program exit code, 0 when all passed
	Programs []ProgramResult
	Console  []byte        // the guest's console (kernel messages, /init errors)
	Duration time.Duration // QEMU start to exit: boot, programs and power-off
	BootTime time.Duration // guest uptime when /init started
	Accel    string        // "tcg" or "kvm"
}

const defaultTimeout = 3 * time.Minute

func (c *Config) programs() []Program {
	var ps []Program
	if c.Binary != "" {
		ps = append(ps, Program{Binary: c.Binary, Args: c.Args})
	}
	return append(ps, c.Programs...)
}

// Run boots the guest described by cfg, runs its programs and powers it off. The
// error is about the harness or the guest as a whole (QEMU failed, the guest timed
// out or crashed); programs that ran and failed show in Result.ExitCode. QEMU is
// killed when ctx ends or the timeout passes.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 2
	}
	if cfg.CPUsPerNode <= 0 {
		cfg.CPUsPerNode = 2
	}
	if cfg.MemPerNodeMB <= 0 {
		cfg.MemPerNodeMB = 512
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	qemu, err := findQEMU()
	if err != nil {
		return Result{}, err
	}
	busybox, err := findBusybox()
	if err != nil {
		return Result{}, err
	}
	kernel, err := FindKernel()
	if err != nil {
		return Result{}, err
	}
	vmlinux, err := kernel.Vmlinux()
	if err != nil {
		return Result{}, err
	}
	accel := cfg.Accel
	if accel == "" {
		accel = os.Getenv("NUMAPROXY_VM_ACCEL")
	}
	if accel == "" {
		accel = probeAccel(context.WithoutCancel(ctx))
	}
	if accel != "tcg" && accel != "kvm" {
		return Result{}, fmt.Errorf("accelerator %q: want tcg or kvm", accel)
	}

	// The initramfs is an unlinked temporary file that QEMU reads through
	// /dev/fd/5: nothing is left behind even if this process is killed.
	initrd, err := os.CreateTemp("", "numaproxy-vm-initramfs-")
	if err != nil {
		return Result{}, err
	}
	os.Remove(initrd.Name())
	defer initrd.Close()
	progs := cfg.programs()
	if err := writeInitramfs(initrd, busybox, kernel.Version, progs, &cfg); err != nil {
		return Result{}, fmt.Errorf("initramfs: %w", err)
	}

	args := qemuArgs(&cfg, accel, vmlinux, "/dev/fd/5")
	res, err := runQEMU(ctx, cfg, qemu, args, progs, initrd)
	res.Accel = accel
	return res, err
}

func writeInitramfs(f *os.File, busybox, kversion string, progs []Program, cfg *Config) error {
	w := bufio.NewWriterSize(f, 1<<20)
	r := newInitramfs(w)
	for _, d := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/proc", "/sys", "/dev", "/tmp", "/root", "/etc", "/run"} {
		if err := r.mkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := r.file("/bin/busybox", 0o755, bb); err != nil {
		return err
	}
	for _, a := range busyboxApplets(busybox) {
		if a == "bin/busybox" {
			continue
		}
		if err := r.symlink("/"+a, "/bin/busybox"); err != nil {
			return err
		}
	}
	etc := map[string]string{
		"/etc/hosts":  "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"/etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for _, name := range []string{"/etc/group", "/etc/hosts", "/etc/passwd"} {
		if err := r.file(name, 0o644, []byte(etc[name])); err != nil {
			return err
		}
	}
	var gps []guestProgram
	for i, p := range progs {
		if err := checkStatic(p.Binary); err != nil {
			return fmt.Errorf("program %s: %w (build it with CGO_ENABLED=0)", p.Binary, err)
		}
		b, err := os.ReadFile(p.Binary)
		if err != nil {
			return err
		}
		gp := guestProgram{path: fmt.Sprintf("/programs/%d/%s", i, filepath.Base(p.Binary)), args: p.Args, env: p.Env, dir: p.Dir}
		if gp.dir == "" {
			gp.dir = "/"
		}
		if err := r.file(gp.path, 0o755, b); err != nil {
			return err
		}
		gps = append(gps, gp)
	}
	var mods []module
	if len(cfg.Modules) > 0 {
		modDir := filepath.Join("/lib/modules", kversion)
		if mods, err = resolveModules(modDir, cfg.Modules); err != nil {
			return err
		}
		for _, m := range mods {
			if err := r.copyHost(path.Join(modDir, m.rel), filepath.Join(modDir, m.rel)); err != nil {
				return err
			}
		}
	}
	for guest, host := range cfg.ExtraFiles {
		if err := r.copyHost(guest, host); err != nil {
			return fmt.Errorf("extra file %s: %w", guest, err)
		}
	}
	script, err := initScript(gps, cfg.Env, mods)
	if err != nil {
		return err
	}
	if err := r.file("/init", 0o755, []byte(script)); err != nil {
		return err
	}
	if err := r.cw.Close(); err != nil {
		return err
	}
	return w.Flush()
}

func qemuArgs(cfg *Config, accel, vmlinux, initrd string) []string {
	cpus := cfg.Nodes * cfg.CPUsPerNode
	args := []string{
		"-machine", "pc", "-accel", accel,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-smp", fmt.Sprintf("%d,sockets=%d,cores=%d,threads=1", cpus, cfg.Nodes, cfg.CPUsPerNode),
		"-m", fmt.Sprintf("%dM", cfg.Nodes*cfg.MemPerNodeMB),
	}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	for n := 0; n < cfg.Nodes; n++ {
		args = append(args,
			"-object", fmt.Sprintf("memory-backend-ram,id=mem%d,size=%dM", n, cfg.MemPerNodeMB),
			"-numa", fmt.Sprintf("node,nodeid=%d,memdev=mem%d", n, n),
			"-numa", fmt.Sprintf("cpu,node-id=%d,socket-id=%d", n, n))
	}
	cmdline := append([]string{"console=ttyS0", "quiet", "cryptomgr.notests", "numa_balancing=disable", "panic=-1"}, cfg.KernelArgs...)
	args = append(args,
		"-kernel", vmlinux, "-initrd", initrd, "-append", strings.Join(cmdline, " "),
		// fd 3 and 4 are the pipes runQEMU passes in ExtraFiles.
		"-chardev", "file,id=console,path=/dev/fd/3", "-serial", "chardev:console",
		"-chardev", "file,id=output,path=/dev/fd/4", "-serial", "chardev:output")
	return args
}

func runQEMU(ctx context.Context, cfg Config, qemu string, args []string, progs []Program, initrd *os.File) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	conR, conW, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	defer conR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		conW.Close()
		return Result{}, err
	}
	defer outR.Close()

	cmd := exec.CommandContext(ctx, qemu, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.ExtraFiles = []*os.File{conW, outW, initrd} // fds 3, 4, 5
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second

	p := newOutputParser(progs, cfg.Stream)
	var console bytes.Buffer
	var wg sync.WaitGroup
	start := time.Now()
	err = cmd.Start()
	conW.Close()
	outW.Close()
	if err != nil {
		return Result{}, fmt.Errorf("start %s: %w", qemu, err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&console, conR) }()
	go func() { defer wg.Done(); p.read(outR) }()
	wg.Wait()
	waitErr := cmd.Wait()

	res := p.result()
	res.Console = console.Bytes()
	res.Duration = time.Since(start)
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("guest did not finish in %v (%w); %s", cfg.Timeout, context.Cause(ctx), p.state(res.Console))
	case waitErr != nil:
		return res, fmt.Errorf("qemu: %w: %s", waitErr, bytes.TrimSpace(stderr.Bytes()))
	case !p.done:
		return res, fmt.Errorf("guest stopped before /init finished; %s", p.state(res.Console))
	}
	return res, nil
}

// outputParser splits the output port's stream into the programs' outputs at the
// marker lines /init writes.
type outputParser struct {
	progs    []ProgramResult
	begun    []float64 // guest uptime at each program's start
	all      bytes.Buffer
	stream   io.Writer
	cur      int // program being run, -1 outside
	initUp   float64
	sawInit  bool
	done     bool
	lastLine string
}

func newOutputParser(progs []Program, stream io.Writer) *outputParser {
	p := &outputParser{cur: -1, stream: stream, begun: make([]float64, len(progs))}
	for _, pr := range progs {
		p.progs = append(p.progs, ProgramResult{Binary: pr.Binary, ExitCode: -1})
	}
	return p
}

func (p *outputParser) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			p.line(line)
		}
		if err != nil {
			return
		}
	}
}

func (p *outputParser) line(line []byte) {
	payload, control := line, ""
	if i := bytes.Index(line, []byte(marker)); i >= 0 {
		payload, control = line[:i], strings.TrimSpace(string(line[i+len(marker):]))
	}
	if len(payload) > 0 {
		p.all.Write(payload)
		if p.cur >= 0 && p.cur < len(p.progs) {
			p.progs[p.cur].Output = append(p.progs[p.cur].Output, payload...)
		}
		if p.stream != nil {
			p.stream.Write(payload)
		}
	}
	if control == "" {
		return
	}
	p.lastLine = control
	f := strings.Fields(control)
	num := func(i int) float64 {
		if i >= len(f) {
			return 0
		}
		v, _ := strconv.ParseFloat(f[i], 64)
		return v
	}
	switch f[0] {
	case "init":
		p.sawInit, p.initUp = true, num(1)
	case "begin":
		p.cur = int(num(1))
		if p.cur >= 0 && p.cur < len(p.begun) {
			p.begun[p.cur] = num(2)
		}
	case "exit":
		if i := int(num(1)); i >= 0 && i < len(p.progs) {
			p.progs[i].ExitCode = int(num(2))
			p.progs[i].Duration = seconds(num(3) - p.begun[i])
		}
		p.cur = -1
	case "done":
		p.done = true
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (p *outputParser) result() Result {
	res := Result{Output: p.all.Bytes(), Programs: p.progs, BootTime: seconds(p.initUp)}
	for _, pr := range p.progs {
		if pr.ExitCode != 0 {
			res.ExitCode = pr.ExitCode
			break
		}
	}
	return res
}

// state describes how far the guest got, for errors.
func (p *outputParser) state(console []byte) string {
	var s string
	switch {
	case !p.sawInit:
		s = "/init never started"
	case p.cur >= 0:
		s = fmt.Sprintf("program %d (%s) was running", p.cur, filepath.Base(p.progs[p.cur].Binary))
	default:
		s = "last step: " + p.lastLine
	}
	return s + "; console tail:\n" + tail(console, 20)
}

func tail(b []byte, lines int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

var (
	accelOnce   sync.Once
	accelMu     sync.Mutex
	accelChoice string
	accelReason string
)

// probeAccel picks KVM when /dev/kvm opens and a probe boot with it powers off
// cleanly (some hosts' /dev/kvm, such as PVM, cannot run a stock kernel), else TCG.
// The choice is made once per process, so the probe does not end with the
// context of the Run that triggered it.
func probeAccel(ctx context.Context) string {
	accelOnce.Do(func() {
		choice, reason := "kvm", "KVM probe boot succeeded"
		if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
			choice, reason = "tcg", err.Error()
		} else {
			f.Close()
			_, err = Run(ctx, Config{Accel: "kvm", Nodes: 1, CPUsPerNode: 1, MemPerNodeMB: 256, Timeout: 30 * time.Second})
			if err != nil {
				choice, reason = "tcg", "KVM probe boot failed: "+firstLine(err.Error())
			}
		}
		accelMu.Lock()
		accelChoice, accelReason = choice, reason
		accelMu.Unlock()
	})
	accelMu.Lock()
	defer accelMu.Unlock()
	return accelChoice
}

// AccelReason says why Run chose its accelerator: "" until a Run has probed KVM.
func AccelReason() string {
	accelMu.Lock()
	defer accelMu.Unlock()
	return accelReason
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
