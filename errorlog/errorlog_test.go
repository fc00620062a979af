package errorlog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFormatAndLevels(t *testing.T) {
	dir := t.TempDir()
	all, warn := filepath.Join(dir, "all.log"), filepath.Join(dir, "sub", "warn.log")
	l, err := Open([]Destination{{Path: all, Level: LevelDebug}, {Path: warn, Level: LevelWarn}})
	if err != nil {
		t.Fatal(err)
	}
	log := l.Logger()
	log.Log(nil, LevelNotice, "signal received", "signal", "SIGHUP")
	log.Error("upstream failed", "addr", "127.0.0.1:1", "why", "connection refused")
	log.Log(nil, LevelEmerg, "fatal")
	l.Close()

	got, _ := os.ReadFile(all)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 {
		t.Fatalf("all.log has %d lines:\n%s", len(lines), got)
	}
	re := regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[notice\] \d+#\d+: signal received, signal=SIGHUP$`)
	if !re.MatchString(lines[0]) {
		t.Errorf("line 0 = %q", lines[0])
	}
	if !strings.Contains(lines[1], " [error] ") || !strings.HasSuffix(lines[1], `: upstream failed, addr=127.0.0.1:1, why="connection refused"`) {
		t.Errorf("line 1 = %q", lines[1])
	}
	w, _ := os.ReadFile(warn)
	if n := strings.Count(string(w), "\n"); n != 2 || strings.Contains(string(w), "notice") {
		t.Errorf("warn.log should hold the error and emerg lines only:\n%s", w)
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "error.log")
	l, err := Open([]Destination{{Path: path, Level: LevelInfo}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Logger().Info("before")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Logger().Info("still old file")
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Logger().Info("after")
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if !strings.Contains(string(old), "before") || !strings.Contains(string(old), "still old file") || strings.Contains(string(old), "after") {
		t.Errorf("rotated file:\n%s", old)
	}
	if !strings.Contains(string(cur), "after") || strings.Contains(string(cur), "before") {
		t.Errorf("new file:\n%s", cur)
	}
}

func TestLevelNames(t *testing.T) {
	for _, n := range []string{"debug", "info", "notice", "warn", "error", "crit", "alert", "emerg"} {
		l, err := ParseLevel(n)
		if err != nil || LevelName(l) != n {
			t.Errorf("%s: %v %v", n, LevelName(l), err)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("loud accepted")
	}
}

func TestOpenFailureNamesFile(t *testing.T) {
	_, err := Open([]Destination{{Path: "/proc/nonexistent/x.log", Level: LevelError}})
	if err == nil || !strings.Contains(err.Error(), `"/proc/nonexistent/x.log"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestReconfigureKeepsLoggers(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log")
	l, err := Open([]Destination{{Path: first, Level: LevelInfo}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	log := l.Logger()
	log.Info("one")
	if err := l.Reconfigure([]Destination{{Path: second, Level: LevelInfo}}); err != nil {
		t.Fatal(err)
	}
	log.Info("two") // the logger made before still works
	if err := l.Reconfigure([]Destination{{Path: "/proc/nonexistent/x.log", Level: LevelInfo}}); err == nil {
		t.Fatal("an unopenable destination accepted")
	}
	log.Info("three") // a failed reconfigure changed nothing
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !strings.Contains(string(a), "one") || strings.Contains(string(a), "two") ||
		!strings.Contains(string(b), "two") || !strings.Contains(string(b), "three") {
		t.Fatalf("first:\n%s\nsecond:\n%s", a, b)
	}
}
