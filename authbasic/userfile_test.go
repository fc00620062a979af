package authbasic

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// An edit of the file counts for requests that start RecheckInterval after the
// last check (nginx: at once); the check and the read happen off the loop.
func TestUserFileEditCountsAfterRecheck(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "users", "ann:{PLAIN}old\n")
	lc := locConf("r", path)
	loop := startLoop(t, -1, false)
	c := NewChecker(loop, nil)
	var a Attempt

	// Never loaded: the first request waits for the read.
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "old")); o != Allowed {
		t.Fatalf("first request: %v", o)
	}
	loaded := lc.File.Table()
	writeFile(t, dir, "users.new", "ann:{PLAIN}new\n")
	if err := os.Rename(filepath.Join(dir, "users.new"), path); err != nil {
		t.Fatal(err)
	}
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "new")); o != Unauthorized {
		t.Fatalf("right after the edit: %v", o)
	}
	time.Sleep(RecheckInterval + 100*time.Millisecond)
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "new")); o != Allowed {
		t.Fatalf("a second after the edit: %v", o)
	}
	if lc.File.Table() == loaded {
		t.Fatal("table not replaced")
	}
	// A check that finds the file as it was keeps the table.
	now := lc.File.Table()
	time.Sleep(RecheckInterval + 100*time.Millisecond)
	checkOn(t, loop, c, &a, lc, basic("ann", "new"))
	if lc.File.Table() != now {
		t.Error("unchanged file read again")
	}
	// An edit in place that keeps the size changes the times.
	time.Sleep(10 * time.Millisecond)
	writeFile(t, dir, "users", "ann:{PLAIN}xyz\n")
	time.Sleep(RecheckInterval + 100*time.Millisecond)
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "xyz")); o != Allowed {
		t.Fatalf("after an edit in place: %v", o)
	}
}

// A missing file is 403 and a file that cannot be read 500, with nginx's log
// lines; a file that appears later counts after the next check. Without
// credentials the file is not looked at: 401.
func TestUserFileErrors(t *testing.T) {
	dir := t.TempDir()
	loop := startLoop(t, -1, false)
	c := NewChecker(loop, nil)
	var a Attempt

	missing := locConf("r", filepath.Join(dir, "nofile"))
	missing.File.Load(nil)
	if o := checkOn(t, loop, c, &a, missing, nil); o != Unauthorized {
		t.Fatalf("no credentials: %v", o)
	}
	if got := string(a.AppendLog(nil)); got != "no user/password was provided for basic authentication" {
		t.Errorf("log %q", got)
	}
	if o := checkOn(t, loop, c, &a, missing, basic("ann", "x")); o != Forbidden {
		t.Fatalf("missing file: %v", o)
	}
	if got, want := string(a.AppendLog(nil)), `open() "`+dir+`/nofile" failed (2: No such file or directory)`; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	if lvl, ok := a.LogLevel(); !ok || lvl.String() != "ERROR" {
		t.Errorf("level %v", lvl)
	}
	writeFile(t, dir, "nofile", "ann:{PLAIN}x")
	time.Sleep(RecheckInterval + 100*time.Millisecond)
	if o := checkOn(t, loop, c, &a, missing, basic("ann", "x")); o != Allowed {
		t.Fatalf("file created: %v", o)
	}

	isDir := locConf("r", dir)
	if o := checkOn(t, loop, c, &a, isDir, basic("ann", "x")); o != InternalError {
		t.Fatalf("a directory: %v", o)
	}
	if got, want := string(a.AppendLog(nil)), `pread() "`+dir+`" failed (21: Is a directory)`; got != want {
		t.Errorf("log %q, want %q", got, want)
	}

	notDir := locConf("r", filepath.Join(dir, "nofile", "x"))
	if o := checkOn(t, loop, c, &a, notDir, basic("ann", "x")); o != InternalError {
		t.Fatalf("a file as a folder: %v", o)
	}

	ok := locConf("r", writeFile(t, dir, "ok", "ann:{PLAIN}x\nbob:$y$j9T$lLfoQsNpPr5JOf20ZWRbY0$NZDFp6jdoe.mpa15bsOLvDEZck/tIdzozX9bVwZYgtC\n"))
	for _, tc := range []struct {
		user, pw string
		want     Outcome
		log      string
	}{
		{"ann", "x", Allowed, ""},
		{"ann", "y", Unauthorized, `user "ann": password mismatch`},
		{"cat", "y", Unauthorized, `user "cat" was not found in "` + dir + `/ok"`},
		{"bob", "y", Unauthorized, `user "bob": the yescrypt scheme is not supported (nginx on Debian accepts it through libcrypt)`},
	} {
		if o := checkOn(t, loop, c, &a, ok, basic(tc.user, tc.pw)); o != tc.want || string(a.AppendLog(nil)) != tc.log || string(a.User()) != tc.user {
			t.Errorf("%s:%s: %v %q", tc.user, tc.pw, o, a.AppendLog(nil))
		}
	}
	off := locConf("off", filepath.Join(dir, "ok"))
	if o := checkOn(t, loop, c, &a, off, nil); o != Declined {
		t.Errorf("auth_basic off: %v", o)
	}
}
