package main

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run printed.
type wrkResult struct {
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	ReqPerSec float64 `json:"req_per_sec"`
	BytesRead float64 `json:"bytes_read"`
	// Socket errors (connect, read, write, timeout) and non-2xx/3xx responses.
	Errors     int64  `json:"errors"`
	ErrorKinds string `json:"error_kinds,omitempty"`
	// Closed-loop latency at saturation (wrk --latency), µs: for the record only.
	P50, P99 float64
}

// runWrk runs wrk pinned to cpu 1 with one thread.
func runWrk(url string, conns int, d time.Duration, headers ...string) (wrkResult, string, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := []string{"-c", "1", "wrk", "-t", "1", "-c", strconv.Itoa(conns), "-d", fmt.Sprintf("%ds", secs), "--latency"}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, url)
	cmd := exec.Command("taskset", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, string(out), fmt.Errorf("wrk: %w: %s", err, out)
	}
	r, err := parseWrk(string(out))
	return r, string(out), err
}

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var kinds []string
	found := false
	inLatency := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Latency Distribution"):
			inLatency = true
		case inLatency && len(f) == 2 && strings.HasSuffix(f[0], "%"):
			v, err := parseWrkDuration(f[1])
			if err == nil {
				switch f[0] {
				case "50%":
					r.P50 = v
				case "99%":
					r.P99 = v
				}
			}
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			inLatency = false
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return r, fmt.Errorf("wrk requests %q: %w", line, err)
			}
			r.Requests = n
			d, err := parseWrkDuration(strings.TrimSuffix(f[3], ","))
			if err != nil {
				return r, fmt.Errorf("wrk duration %q: %w", line, err)
			}
			r.Seconds = d / 1e6
			if b, err := parseWrkSize(f[4]); err == nil {
				r.BytesRead = b
			}
			found = true
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 0
			rest := strings.TrimPrefix(line, "Socket errors:")
			for _, part := range strings.Split(rest, ",") {
				kv := strings.Fields(part)
				if len(kv) == 2 {
					n, _ := strconv.ParseInt(kv[1], 10, 64)
					if n > 0 {
						r.Errors += n
						kinds = append(kinds, kv[0]+" "+kv[1])
					}
				}
			}
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
			r.Errors += n
			if n > 0 {
				kinds = append(kinds, fmt.Sprintf("non-2xx %d", n))
			}
		case strings.HasPrefix(line, "Requests/sec:"):
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, "Requests/sec:")), 64)
			if err == nil {
				r.ReqPerSec = v
			}
		}
	}
	if !found {
		return r, fmt.Errorf("no request count in wrk output: %q", out)
	}
	r.ErrorKinds = strings.Join(kinds, ", ")
	return r, nil
}

// parseWrkDuration parses wrk's "1.23ms", "456.00us", "10.00s", "1.50m" into µs.
func parseWrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			return f * u.us, nil
		}
	}
	return 0, fmt.Errorf("unknown duration %q", s)
}

// parseWrkSize parses "12.34MB", "1.23GB", "512B" into bytes (wrk uses powers of 1024).
func parseWrkSize(s string) (float64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			return f * u.mult, nil
		}
	}
	return 0, fmt.Errorf("unknown size %q", s)
}
