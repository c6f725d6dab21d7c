// Command release builds sidemirror's release artifacts, reproducibly: the
// same commit, version and date give byte-identical files.
//
//	go run ./release -repo .. -out ../dist -version v1.2.0 -commit abc1234 -date 1767225600
//
// For every target (GOOS/GOARCH) it writes to -out:
//
//	sidemirror_<version>_<os>_<arch>.tar.gz   the binaries, the systemd unit, the example config, README
//	sidemirror_<pkgversion>-1_<arch>.deb      Debian and Ubuntu package
//	sidemirror-<pkgversion>-1.<rpm arch>.rpm  RHEL, Fedora, SUSE package
//	SHA256SUMS                                checksums of all of the above
//	bin/<os>_<arch>/                          the binaries themselves (the Dockerfile copies them)
//
// The binaries are static (CGO_ENABLED=0), built with -trimpath and no build
// ID, so they do not depend on the build machine's paths. Every time stamp in
// the archives and packages is -date (default: the commit's time, or
// SOURCE_DATE_EPOCH when set), and files go in sorted order.
//
// Files:
//
//	main.go      flags, the build of every target, SHA256SUMS
//	build.go     the static go build of the two binaries
//	archive.go   the .tar.gz archive
//	packages.go  the .deb and .rpm packages (nfpm), their maintainer scripts
//	version.go   package versions (<pkgversion>) from git describe output
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// options say what to build and where.
type options struct {
	repo    string    // repository root (holds go.mod of sidemirror)
	out     string    // output directory
	version string    // as git describe prints it, e.g. v1.2.0 or v1.2.0-3-gabc1234
	commit  string    // short commit
	date    time.Time // every time stamp in the artifacts
	targets []target
	formats []string // tar.gz, deb, rpm
}

type target struct{ os, arch string }

func (t target) String() string { return t.os + "/" + t.arch }

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	repo := fs.String("repo", "..", "repository root")
	out := fs.String("out", "../dist", "output directory")
	version := fs.String("version", "", "version (default: git describe --tags --always --dirty)")
	commit := fs.String("commit", "", "commit (default: git rev-parse --short HEAD)")
	date := fs.String("date", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every time stamp (default: the commit's time)")
	targets := fs.String("targets", "linux/amd64,linux/arm64", "comma-separated GOOS/GOARCH list")
	formats := fs.String("formats", "tar.gz,deb,rpm", "comma-separated list of tar.gz, deb, rpm, bin (binaries only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := options{repo: *repo, out: *out, version: *version, commit: *commit}
	var err error
	if o.version == "" {
		if o.version, err = git(o.repo, "describe", "--tags", "--always", "--dirty"); err != nil {
			return err
		}
	}
	if o.commit == "" {
		if o.commit, err = git(o.repo, "rev-parse", "--short", "HEAD"); err != nil {
			return err
		}
	}
	if *date == "" {
		if *date, err = git(o.repo, "log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	secs, err := strconv.ParseInt(*date, 10, 64)
	if err != nil {
		return fmt.Errorf("-date %q is not a Unix time in seconds", *date)
	}
	o.date = time.Unix(secs, 0).UTC()
	for t := range strings.SplitSeq(*targets, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("-targets: %q is not GOOS/GOARCH (e.g. linux/amd64)", t)
		}
		o.targets = append(o.targets, target{goos, goarch})
	}
	for f := range strings.SplitSeq(*formats, ",") {
		switch f = strings.TrimSpace(f); f {
		case "bin":
			// Binaries only (bin/<os>_<arch>/ is always written).
		case "tar.gz", "deb", "rpm":
			o.formats = append(o.formats, f)
		default:
			return fmt.Errorf("-formats: %q is not one of tar.gz, deb, rpm, bin", f)
		}
	}
	files, err := build(o, log)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(log, filepath.Join(o.out, f))
	}
	return nil
}

// build writes every artifact of o and SHA256SUMS into o.out and returns
// their names.
func build(o options, log io.Writer) ([]string, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return nil, err
	}
	o.repo = repo
	var names []string
	for _, t := range o.targets {
		binDir := filepath.Join(o.out, "bin", t.os+"_"+t.arch)
		fmt.Fprintf(log, "release: building %s %s\n", t, o.version)
		if err := buildBinaries(o, t, binDir); err != nil {
			return nil, err
		}
		for _, f := range o.formats {
			var name string
			var err error
			switch f {
			case "tar.gz":
				name, err = writeArchive(o, t, binDir)
			default:
				if t.os != "linux" {
					continue
				}
				name, err = writePackage(o, t, binDir, f)
			}
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", t, f, err)
			}
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if err := writeChecksums(o.out, names); err != nil {
		return nil, err
	}
	return append(names, "SHA256SUMS"), nil
}

// writeChecksums writes SHA256SUMS in the format sha256sum -c reads.
func writeChecksums(dir string, names []string) error {
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func git(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w (pass -version, -commit and -date outside a git checkout)", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
