package main

import (
	"os"
	"slices"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
)

func TestFilterEnv(t *testing.T) {
	start := []string{"PATH=/bin", "TZ=UTC", "HOME=/root", "GOGC=50", "NUMAPROXY_X=1", "KEEP=k", "SET=old"}
	got := filterEnv(start, []conf.EnvVar{{Name: "KEEP"}, {Name: "SET", Value: "new", Set: true}, {Name: "ABSENT"}, {Name: "NEW", Value: "v", Set: true}})
	want := []string{"TZ=UTC", "GOGC=50", "NUMAPROXY_X=1", "KEEP=k", "SET=new", "NEW=v"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestFilterEnvKeepsNotifySocket(t *testing.T) {
	got := filterEnv([]string{"PATH=/bin", "NOTIFY_SOCKET=/run/systemd/notify"}, nil)
	if !slices.Equal(got, []string{"NOTIFY_SOCKET=/run/systemd/notify"}) {
		t.Fatalf("got %q: a binary upgrade's new process could not notify systemd", got)
	}
}

// TestTakeEnv: a hand-over variable read once is gone from the environment and
// from what env directives rebuild it from on reload.
func TestTakeEnv(t *testing.T) {
	defer func(saved []string) { startEnv = saved }(startEnv)
	t.Setenv("NUMAPROXY_TEST_TAKE", "3")
	startEnv = append(slices.Clone(startEnv), "NUMAPROXY_TEST_TAKE=3")
	if v, ok := takeEnv("NUMAPROXY_TEST_TAKE"); !ok || v != "3" {
		t.Fatalf("takeEnv: %q %v", v, ok)
	}
	if _, ok := os.LookupEnv("NUMAPROXY_TEST_TAKE"); ok {
		t.Fatal("still in the environment")
	}
	if slices.Contains(filterEnv(startEnv, nil), "NUMAPROXY_TEST_TAKE=3") {
		t.Fatal("a reload would put it back")
	}
	if _, ok := takeEnv("NUMAPROXY_TEST_TAKE"); ok {
		t.Fatal("taken twice")
	}
}
