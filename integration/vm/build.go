package vm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildTestBinary compiles the tests of the package in pkgDir (a directory or an
// import path) into a static x86-64 Linux binary at outPath, for running in the guest.
func BuildTestBinary(pkgDir, outPath string) error {
	return goBuild(pkgDir, "test", "-c", "-o", outPath)
}

// BuildBinary compiles the main package in pkgDir into a static x86-64 Linux binary
// at outPath.
func BuildBinary(pkgDir, outPath string) error {
	return goBuild(pkgDir, "build", "-o", outPath)
}

func goBuild(pkg string, args ...string) error {
	goTool := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			goTool = p
		}
	}
	dir := ""
	target := pkg
	if st, err := os.Stat(pkg); err == nil && st.IsDir() {
		// Build from the package's own directory so its module is the one used.
		dir, target = pkg, "."
	}
	if abs, err := filepath.Abs(args[len(args)-1]); err == nil {
		args[len(args)-1] = abs
	}
	cmd := exec.Command(goTool, append(args, target)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s %s: %w\n%s", strings.Join(args, " "), pkg, err, bytes.TrimSpace(out.Bytes()))
	}
	if !fileExists(args[len(args)-1]) {
		// go test -c writes nothing for a package without test files.
		return fmt.Errorf("go %s %s: no binary written (package has no tests?)", args[0], pkg)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
