package conf

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	good := map[string]time.Duration{
		"0": 0, "30": 30 * time.Second, "30s": 30 * time.Second, "500ms": 500 * time.Millisecond,
		"1m": time.Minute, "1m30s": 90 * time.Second, "1h 30m": 90 * time.Minute, "2d": 48 * time.Hour,
		"1w": 7 * 24 * time.Hour, "1M": 30 * 24 * time.Hour, "1y": 365 * 24 * time.Hour, "1s500ms": 1500 * time.Millisecond,
	}
	for in, want := range good {
		if got, err := ParseTime(in); err != nil || got != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "s", "10x", "-1s", "30m1h", "1s1s", "1.5s", "99999999999999999999", "1 2"} {
		if got, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"0": 0, "512": 512, "8k": 8192, "8K": 8192, "1m": 1 << 20, "2G": 2 << 30}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "-1", "+1", "1kb", "1t", "1.5m", "99999999999999999999g"} {
		if got, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseFlagAndNumber(t *testing.T) {
	if v, err := ParseFlag("On"); err != nil || !v {
		t.Errorf("On: %v %v", v, err)
	}
	if v, err := ParseFlag("off"); err != nil || v {
		t.Errorf("off: %v %v", v, err)
	}
	if _, err := ParseFlag("yes"); err == nil {
		t.Error("yes accepted")
	}
	if n, err := ParseNumber("1024"); err != nil || n != 1024 {
		t.Errorf("1024: %v %v", n, err)
	}
	for _, bad := range []string{"", "-1", "1k", "99999999999"} {
		if _, err := ParseNumber(bad); err == nil {
			t.Errorf("ParseNumber(%q) accepted", bad)
		}
	}
}
