package vm

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOutputParser(t *testing.T) {
	progs := []Program{{Binary: "/x/a"}, {Binary: "/x/b"}, {Binary: "/x/c"}}
	var stream bytes.Buffer
	p := newOutputParser(progs, &stream)
	in := marker + "init 2.50\n" +
		"modprobe says hi\n" +
		marker + "begin 0 2.60\n" +
		"line 1\nline 2\n" +
		marker + "exit 0 0 3.10\n" +
		marker + "begin 1 3.10\n" +
		"no newline at end" + marker + "exit 1 7 3.20\n" +
		marker + "begin 2 3.20\n" +
		"crashed mid-"
	p.read(strings.NewReader(in))
	res := p.result()
	if p.done {
		t.Error("done without a done marker")
	}
	if res.BootTime != 2500*time.Millisecond {
		t.Errorf("BootTime %v", res.BootTime)
	}
	want := []ProgramResult{
		{Binary: "/x/a", Output: []byte("line 1\nline 2\n"), ExitCode: 0, Duration: 500 * time.Millisecond},
		{Binary: "/x/b", Output: []byte("no newline at end"), ExitCode: 7, Duration: 100 * time.Millisecond},
		{Binary: "/x/c", Output: []byte("crashed mid-"), ExitCode: -1},
	}
	for i := range want {
		g := res.Programs[i]
		g.Duration = g.Duration.Round(time.Millisecond)
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("program %d: got %+v, want %+v", i, g, want[i])
		}
	}
	if res.ExitCode != 7 {
		t.Errorf("ExitCode %d, want 7", res.ExitCode)
	}
	all := "modprobe says hi\nline 1\nline 2\nno newline at endcrashed mid-"
	if string(res.Output) != all || stream.String() != all {
		t.Errorf("Output %q, stream %q, want %q", res.Output, stream.String(), all)
	}
	if s := p.state(nil); !strings.Contains(s, "program 2 (c) was running") {
		t.Errorf("state: %s", s)
	}
	p.line([]byte(marker + "done 3.3\n"))
	if !p.done {
		t.Error("done marker not seen")
	}
}

func TestInitScript(t *testing.T) {
	s, err := initScript([]guestProgram{{path: "/programs/0/t", args: []string{"-test.run", "it's"}, env: []string{"A=b c"}, dir: "/src"}},
		[]string{"NUMAPROXY_IN_VM=1"}, []module{{"tls", "kernel/net/tls/tls.ko"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"mount -t bpf bpf /sys/fs/bpf",
		"ip link set lo up",
		"stty -F $out raw -echo",
		"depmod\nmodprobe tls ",
		"export 'NUMAPROXY_IN_VM=1'",
		"export 'A=b c'",
		`exec '/programs/0/t' '-test.run' 'it'\''s' </dev/null`,
		"poweroff -f",
	} {
		if !strings.Contains(s, w) {
			t.Errorf("init script lacks %q:\n%s", w, s)
		}
	}
	if _, err := initScript(nil, []string{"BAD NAME=1"}, nil); err == nil {
		t.Error("bad environment name accepted")
	}
}

func TestResolveModules(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/net/tls/tls.ko: kernel/crypto/x.ko\n" +
		"kernel/crypto/x.ko: kernel/crypto/y-base.ko\n" +
		"kernel/crypto/y-base.ko:\n" +
		"kernel/other/z.ko:\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := resolveModules(dir, []string{"tls", "y-base"})
	if err != nil {
		t.Fatal(err)
	}
	want := []module{{"y_base", "kernel/crypto/y-base.ko"}, {"x", "kernel/crypto/x.ko"}, {"tls", "kernel/net/tls/tls.ko"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := resolveModules(dir, []string{"nope"}); err == nil {
		t.Error("unknown module accepted")
	}
}
