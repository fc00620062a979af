package steering

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestProgramVerifiesEveryShape loads the program with the limits' extremes:
// load-time constants let the verifier prune code, so a shape this machine's
// tests do not use (many nodes, many domains) could otherwise fail only on
// the machine that has it.
func TestProgramVerifiesEveryShape(t *testing.T) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	wide := make([]int, MaxDomains)
	for d := range wide {
		wide[d] = d * (MaxNodes - 1) / (MaxDomains - 1) // 0 ... MaxNodes-1
	}
	for name, cfg := range map[string]Config{
		"smallest":         {Domains: 1},
		"widest":           {Domains: MaxDomains, MaxPerDomain: MaxPerDomain, DomainNode: wide},
		"numa node id":     {Domains: MaxDomains, MaxPerDomain: MaxPerDomain, UseNumaNodeID: true},
		"simulated domain": simulatedConfig(),
	} {
		t.Run(name, func(t *testing.T) {
			if err := cfg.normalize(); err != nil {
				t.Fatal(err)
			}
			if err := probe(); err != nil {
				t.Skip(err)
			}
			spec, _, err := newSpec(cfg, ncpu)
			if err != nil {
				t.Fatal(err)
			}
			var objs steeringObjects
			if err := spec.LoadAndAssign(&objs, nil); err != nil {
				var ve *ebpf.VerifierError
				if errors.As(err, &ve) {
					t.Fatalf("%+v", ve)
				}
				t.Fatal(err)
			}
			objs.Close()
		})
	}
}

// TestGeneratedUpToDate rebuilds steering.c with the //go:generate line of
// gen.go into a temporary directory and compares the result byte for byte
// with the committed steering_bpfel.o and steering_bpfel.go, so CI catches a
// source edited without `go generate`. It needs clang and llvm-strip (Debian:
// clang llvm libbpf-dev); the bytes depend on the clang version, so CI must
// use the one the files were generated with (Debian bookworm's clang 14).
func TestGeneratedUpToDate(t *testing.T) {
	for _, tool := range []string{"clang", "llvm-strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install clang llvm libbpf-dev): cannot check the generated BPF object", tool)
		}
	}
	if testing.Short() {
		t.Skip("compiles C; skipped in -short")
	}
	args := generateArgs(t)
	dir := t.TempDir()
	// go tool bpf2go -output-dir DIR <flags...> ident source -- cflags
	args = append([]string{args[0], args[1], "-output-dir", dir}, args[2:]...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOPACKAGE=steering", "GOFILE=gen.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	for _, name := range []string{"steering_bpfel.o", "steering_bpfel.go"} {
		fresh, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s differs from a fresh build of steering.c (%d vs %d bytes): run go generate ./numa/steering and commit", name, len(committed), len(fresh))
		}
	}
}

// generateArgs returns the //go:generate command of gen.go, without "go".
func generateArgs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "//go:generate go "); ok {
			args := strings.Fields(rest)
			if len(args) < 2 || args[0] != "tool" || args[1] != "bpf2go" {
				t.Fatalf("unexpected go:generate line: %s", sc.Text())
			}
			return args
		}
	}
	t.Fatal("no //go:generate line in gen.go")
	return nil
}
