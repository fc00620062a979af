// Command numa-vm runs Go tests inside a two-node NUMA guest booted by package vm.
//
//	go run ./integration/vm/cmd/numa-vm [flags] [package-pattern-or-binary ...]
//
// Each package's tests are built as a static binary (CGO_ENABLED=0 go test -c) and
// all of them run one after another in one boot, with -test.v and NUMAPROXY_IN_VM=1
// in their environment (also NUMAPROXY_VM_NODES and NUMAPROXY_VM_CPUS_PER_NODE), in
// a copy of their package's testdata. A file argument is run as it is (it must be
// static). Without arguments, it runs the packages of this module whose test files
// mention NUMAPROXY_IN_VM. The probe (topology, getcpu, mbind) runs first unless
// -probe=false. The exit code is 0 only if every binary passed.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numaproxy/numaproxy/integration/vm"
)

const probePkg = "github.com/numaproxy/numaproxy/integration/vm/probe"

// ktlsModules are loaded by default for package tls's kTLS tests: the TLS ULP and
// the AEADs it instantiates (AES-GCM, ChaCha20-Poly1305), loaded by name since
// busybox's depmod writes no modules.alias for the kernel's crypto-* requests.
const ktlsModules = "tls,gcm,ghash-generic,ctr,chacha20poly1305,chacha-generic,poly1305-generic"

// target is one binary to run in the guest.
type target struct {
	name    string // import path or file name
	binary  string // host path
	dir     string // host package directory, "" for a given binary
	isTest  bool
	isProbe bool
}

func main() {
	timeout := flag.Duration("timeout", 3*time.Minute, "limit for the whole boot, all binaries included")
	allowMissing := flag.Bool("allow-missing", false, "exit 0 when QEMU, the kernel or busybox is missing (after saying so)")
	run := flag.String("run", "", "passed to the test binaries as -test.run")
	nodes := flag.Int("nodes", 2, "NUMA nodes")
	cpus := flag.Int("cpus-per-node", 2, "CPUs per node")
	mem := flag.Int("mem", 512, "MiB of memory per node")
	modules := flag.String("modules", ktlsModules, "comma-separated kernel modules to load first")
	probe := flag.Bool("probe", true, "run the topology probe first")
	stream := flag.Bool("v", false, "stream the guest's output as it arrives")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: numa-vm [flags] [package-pattern-or-binary ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	if err := vm.Available(); err != nil {
		fmt.Printf("QEMU not available: %v\n", err)
		if *allowMissing {
			return
		}
		os.Exit(2)
	}
	// A reader that goes away (| head) must not kill us before the clean-up.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "numa-vm-")
	if err != nil {
		fatal(err)
	}
	code := runAll(ctx, tmp, flag.Args(), options{
		timeout: *timeout, run: *run, nodes: *nodes, cpus: *cpus, mem: *mem,
		modules: splitComma(*modules), probe: *probe, stream: *stream,
	})
	os.RemoveAll(tmp)
	os.Exit(code)
}

type options struct {
	timeout          time.Duration
	run              string
	nodes, cpus, mem int
	modules          []string
	probe, stream    bool
}

func runAll(ctx context.Context, tmp string, args []string, o options) int {
	buildStart := time.Now()
	targets, err := prepare(tmp, args, o.probe)
	if err != nil {
		fmt.Fprintln(os.Stderr, "numa-vm:", err)
		return 1
	}
	if len(targets) == 0 {
		fmt.Println("numa-vm: nothing to run (no package's tests mention NUMAPROXY_IN_VM)")
		return 0
	}
	fmt.Printf("numa-vm: prepared %d binaries in %v\n", len(targets), time.Since(buildStart).Round(100*time.Millisecond))

	cfg := vm.Config{
		Nodes: o.nodes, CPUsPerNode: o.cpus, MemPerNodeMB: o.mem, Timeout: o.timeout,
		Modules:    o.modules,
		Env:        []string{"NUMAPROXY_IN_VM=1", "NUMAPROXY_VM_NODES=" + strconv.Itoa(o.nodes), "NUMAPROXY_VM_CPUS_PER_NODE=" + strconv.Itoa(o.cpus)},
		ExtraFiles: map[string]string{},
	}
	if o.stream {
		cfg.Stream = os.Stdout
	}
	for i, t := range targets {
		p := vm.Program{Binary: t.binary}
		switch {
		case t.isProbe:
			p.Args = []string{"-nodes", strconv.Itoa(o.nodes), "-cpus-per-node", strconv.Itoa(o.cpus)}
		case t.isTest:
			p.Args = []string{"-test.v", "-test.count=1", "-test.timeout", o.timeout.String()}
			if o.run != "" {
				p.Args = append(p.Args, "-test.run", o.run)
			}
			// Tests find their testdata relative to the package directory.
			p.Dir = fmt.Sprintf("/src/%d", i)
			if st, err := os.Stat(filepath.Join(t.dir, "testdata")); err == nil && st.IsDir() {
				cfg.ExtraFiles[path.Join(p.Dir, "testdata")] = filepath.Join(t.dir, "testdata")
			}
		}
		cfg.Programs = append(cfg.Programs, p)
	}
	res, err := vm.Run(ctx, cfg)
	failed := 0
	for i, t := range targets {
		var pr vm.ProgramResult
		if i < len(res.Programs) {
			pr = res.Programs[i]
		} else {
			pr.ExitCode = -1
		}
		if !o.stream {
			fmt.Printf("=== %s (in the guest)\n", t.name)
			os.Stdout.Write(indent(pr.Output))
		}
		switch pr.ExitCode {
		case 0:
			fmt.Printf("PASS %s (%v)\n", t.name, pr.Duration.Round(10*time.Millisecond))
		case -1:
			failed++
			fmt.Printf("FAIL %s (did not finish)\n", t.name)
		default:
			failed++
			fmt.Printf("FAIL %s (exit code %d, %v)\n", t.name, pr.ExitCode, pr.Duration.Round(10*time.Millisecond))
		}
	}
	reason := vm.AccelReason()
	if reason != "" {
		reason = " (" + reason + ")"
	}
	fmt.Printf("numa-vm: %d nodes x %d CPUs, accelerator %s%s; guest /init at %v, boot+tests+poweroff %v\n",
		o.nodes, o.cpus, res.Accel, reason, res.BootTime.Round(10*time.Millisecond), res.Duration.Round(10*time.Millisecond))
	if err != nil {
		fmt.Printf("numa-vm: FAIL: %v\n", err)
		return 1
	}
	if failed > 0 {
		fmt.Printf("numa-vm: FAIL: %d of %d binaries failed\n", failed, len(targets))
		return 1
	}
	fmt.Printf("numa-vm: PASS: %d binaries\n", len(targets))
	return 0
}

// prepare builds the probe and the test binaries of the packages args name.
func prepare(tmp string, args []string, probe bool) ([]target, error) {
	var targets []target
	if probe {
		out := filepath.Join(tmp, "probe")
		if err := vm.BuildBinary(probePkg, out); err != nil {
			return nil, err
		}
		targets = append(targets, target{name: "probe", binary: out, isProbe: true})
	}
	var patterns []string
	for _, a := range args {
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			abs, _ := filepath.Abs(a)
			targets = append(targets, target{name: filepath.Base(a), binary: abs})
			continue
		}
		if st, err := os.Stat(a); err == nil && st.IsDir() && !filepath.IsAbs(a) && !strings.HasPrefix(a, ".") {
			a = "./" + a
		}
		patterns = append(patterns, a)
	}
	explicit := len(patterns) > 0
	if len(args) == 0 {
		patterns = []string{"./..."}
	}
	if len(patterns) == 0 {
		return targets, nil
	}
	pkgs, err := listPackages(patterns, explicit)
	if err != nil {
		return nil, err
	}
	for i, p := range pkgs {
		out := filepath.Join(tmp, fmt.Sprintf("%d-%s.test", i, path.Base(p.importPath)))
		if err := vm.BuildTestBinary(p.dir, out); err != nil {
			return nil, err
		}
		targets = append(targets, target{name: p.importPath, binary: out, dir: p.dir, isTest: true})
	}
	return targets, nil
}

type pkg struct{ importPath, dir string }

// listPackages resolves patterns to packages with tests. When the patterns were not
// given explicitly, only packages whose test files mention NUMAPROXY_IN_VM are kept.
// Package vm and its subpackages are never run in the guest.
func listPackages(patterns []string, explicit bool) ([]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-f",
		"{{.ImportPath}}\t{{.Dir}}\t{{join .TestGoFiles \",\"}}\t{{join .XTestGoFiles \",\"}}"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v: %s", strings.Join(patterns, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	var pkgs []pkg
	// Not TrimSpace: the last field is often empty, and its tab must stay.
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		p := pkg{f[0], f[1]}
		if strings.HasSuffix(p.importPath, "/integration/vm") || strings.Contains(p.importPath, "/integration/vm/") {
			continue
		}
		files := append(splitComma(f[2]), splitComma(f[3])...)
		if len(files) == 0 {
			if explicit {
				return nil, fmt.Errorf("%s has no test files", p.importPath)
			}
			continue
		}
		if !explicit && !mentions(p.dir, files, "NUMAPROXY_IN_VM") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func mentions(dir string, files []string, s string) bool {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func indent(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	var out bytes.Buffer
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" {
			out.WriteString("    " + l)
		}
	}
	if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "numa-vm:", err)
	os.Exit(1)
}
