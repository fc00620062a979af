package main

import (
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
