package httpcore

import "testing"

// AppendBasicUser is $remote_user: the user of ParseBasic's reading, as
// ngx_http_auth_basic_user, appended after what dst holds.
func TestAppendBasicUser(t *testing.T) {
	for value, want := range map[string]string{
		"Basic YW5uOnNlY3JldA==":  "ann",   // ann:secret
		"bASIC   YW5uOg==":        "ann",   // any case, more spaces; empty password
		"Basic YW5uOnNlY3JldA":    "ann",   // no padding
		"Basic OnNlY3JldA==":      "",      // :secret, an empty user
		"Basic YW5u":              "",      // no colon
		"Basic YW5uOnNlY3JldA=?x": "ann",   // the input ends at the first '='
		"Basic YW5u*":             "",      // outside the alphabet
		"Basic\x00YW5uOnNlY3JldA": "",      // not a space after the scheme
		"Bearer YW5uOnNlY3JldA==": "",      // another scheme
		"Basic ":                  "",      // nothing
		"Basic YW5uOnNlY3JldA===": "ann",   // what follows the first '=' is ignored
		"Basic YWxpY2U6cHc=":      "alice", // alice:pw
	} {
		if got := string(AppendBasicUser([]byte("x|"), []byte(value))); got != "x|"+want {
			t.Errorf("%q: %q, want %q", value, got, "x|"+want)
		}
	}
}
