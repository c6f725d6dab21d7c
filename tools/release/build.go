package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaries are the commands every artifact holds, by file name.
var binaries = []struct{ name, pkg string }{
	{"sidemirror", "./cmd/sidemirror"},
	{"kafka-cluster-mirrors", "./cmd/kafka-cluster-mirrors"},
}

// ldflags sets the version variables the binaries print, strips the symbol
// table and drops the build ID (it hashes the build machine's inputs).
func ldflags(o options) string {
	return strings.Join([]string{
		"-s", "-w", "-buildid=",
		"-X", "github.com/sidemirror/sidemirror/sidecar.Version=" + o.version,
		"-X", "github.com/sidemirror/sidemirror/sidecar.Commit=" + o.commit,
		"-X", "main.version=" + o.version,
	}, " ")
}

// buildBinaries builds the static binaries of t into dir.
func buildBinaries(o options, t target, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, b := range binaries {
		out, err := filepath.Abs(filepath.Join(dir, b.name))
		if err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-mod=readonly",
			"-ldflags", ldflags(o), "-o", out, b.pkg)
		cmd.Dir = o.repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.os, "GOARCH="+t.arch, "GOFLAGS=")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s for %s: %w\n%s", b.pkg, t, err, msg)
		}
	}
	return nil
}
