package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestPackageVersion(t *testing.T) {
	for _, tc := range []struct{ describe, want string }{
		{"v1.2.0", "1.2.0"},
		{"1.2.0", "1.2.0"},
		{"v1.2.0-rc1", "1.2.0~rc1"},
		{"v1.2.0-3-gabc1234", "1.2.0+3.gabc1234"},
		{"v1.2.0-3-gabc1234-dirty", "1.2.0+3.gabc1234.dirty"},
		{"v1.2.0-rc.1-3-gabc1234", "1.2.0~rc.1+3.gabc1234"},
		{"v1.2.0-dirty", "1.2.0+dirty"},
		{"abc1234", "0.0.0+git.abc1234"},
		{"abc1234-dirty", "0.0.0+git.abc1234.dirty"},
	} {
		t.Run(tc.describe, func(t *testing.T) {
			if got := packageVersion(tc.describe); got != tc.want {
				t.Errorf("packageVersion(%q) = %q, want %q", tc.describe, got, tc.want)
			}
		})
	}
}

// testOptions builds linux/amd64 (the machine's own architecture, so that
// the install test can run the binary) of a fixed version and date.
func testOptions(out string) options {
	return options{
		repo: "../..", out: out, version: "v9.8.7-2-gabcdef0", commit: "abcdef0",
		date:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		targets: []target{{"linux", "amd64"}},
		formats: []string{"tar.gz", "deb", "rpm"},
	}
}

var (
	builtOnce sync.Once
	builtDir  string
	builtErr  error
)

// built returns the directory of one build of testOptions, shared by the
// tests of this package.
func built(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		builtDir, builtErr = os.MkdirTemp("", "sidemirror-release-test-")
		if builtErr == nil {
			_, builtErr = build(testOptions(builtDir), io.Discard)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// A second build into another directory, later, gives byte-identical
// artifacts.
func TestReproducible(t *testing.T) {
	first := built(t)
	second := t.TempDir()
	if _, err := build(testOptions(second), io.Discard); err != nil {
		t.Fatal(err)
	}
	a := readFile(t, filepath.Join(first, "SHA256SUMS"))
	b := readFile(t, filepath.Join(second, "SHA256SUMS"))
	if a != b {
		t.Fatalf("two builds differ:\nfirst:\n%s\nsecond:\n%s", a, b)
	}
	if n := strings.Count(a, "\n"); n != 3 {
		t.Fatalf("SHA256SUMS lists %d artifacts, want 3 (tar.gz, deb, rpm):\n%s", n, a)
	}
}

// Every file in the archive carries the release date, is owned by root and
// the binaries are static.
func TestArchive(t *testing.T) {
	dir := built(t)
	o := testOptions(dir)
	f, err := os.Open(filepath.Join(dir, "sidemirror_v9.8.7-2-gabcdef0_linux_amd64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header has time %v and name %q, want neither", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(o.date) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: time %v uid %d gid %d, want %v and root", h.Name, h.ModTime, h.Uid, h.Gid, o.date)
		}
		if base := filepath.Base(h.Name); base == "sidemirror" || base == "kafka-cluster-mirrors" {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			checkStatic(t, h.Name, data)
		}
	}
	top := "sidemirror_v9.8.7-2-gabcdef0_linux_amd64/"
	want := []string{top, top + "README.md", top + "kafka-cluster-mirrors", top + "sidecar.properties",
		top + "sidemirror", top + "sidemirror.env", top + "sidemirror.service"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("archive holds %v, want %v", names, want)
	}
}

// checkStatic fails unless data is an ELF executable without a program
// interpreter or shared library dependencies.
func checkStatic(t *testing.T, name string, data []byte) {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (program header %v)", name, p.Type)
		}
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", name, libs)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The rpm is well formed (its digests verify) and installs the files the
// deb installs. Needs the rpm tool (scripts/setup.sh installs it).
func TestRPM(t *testing.T) {
	if _, err := exec.LookPath("rpm"); err != nil {
		requireInCI(t, "rpm not found (scripts/setup.sh installs it)")
	}
	rpm := filepath.Join(built(t), "sidemirror-9.8.7+2.gabcdef0-1.x86_64.rpm")
	mustRun(t, "rpm", "--checksig", "--nosignature", rpm)
	info := mustRun(t, "rpm", "-qp", "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}\n", rpm)
	if info != "sidemirror 9.8.7+2.gabcdef0 1 x86_64\n" {
		t.Errorf("rpm -qp: %q", info)
	}
	list := mustRun(t, "rpm", "-qp", "--queryformat", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILENAMES}\n]", rpm)
	for path, want := range map[string]string{
		"/usr/bin/sidemirror":                        "-rwxr-xr-x root root",
		"/usr/bin/kafka-cluster-mirrors":             "-rwxr-xr-x root root",
		"/usr/lib/systemd/system/sidemirror.service": "-rw-r--r-- root root",
		"/etc/sysconfig/sidemirror":                  "-rw-r--r-- root root",
		"/etc/sidemirror":                            "drwxr-x--- root sidemirror",
		"/etc/sidemirror/sidecar.properties":         "-rw-r----- root sidemirror",
	} {
		found := false
		for line := range strings.Lines(list) {
			f := strings.Fields(line)
			if len(f) == 4 && f[3] == path {
				found = true
				if got := strings.Join(f[:3], " "); got != want {
					t.Errorf("rpm: %s is %q, want %q", path, got, want)
				}
			}
		}
		if !found {
			t.Errorf("rpm lacks %s:\n%s", path, list)
		}
	}
	if !strings.Contains(mustRun(t, "rpm", "-qp", "--scripts", rpm), "useradd --system") {
		t.Error("the rpm's scripts do not create the sidemirror user")
	}
}

// requireInCI skips the test on a developer machine and fails it in CI,
// where scripts/setup.sh installed everything.
func requireInCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// The .deb installs with dpkg on this machine: the sidemirror user exists,
// the binaries run, the example config is readable by the sidemirror group
// only, and systemd accepts the unit without a warning. It purges the
// package at the end. Needs root and dpkg (Debian).
func TestDebInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		requireInCI(t, "installing a package needs root")
	}
	for _, tool := range []string{"dpkg", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			requireInCI(t, tool+" not found (scripts/setup.sh installs systemd)")
		}
	}
	// One package test at a time on this machine.
	lock, err := os.OpenFile("/tmp/sidemirror-dpkg.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "sidemirror").Output(); err == nil &&
		strings.Contains(string(out), "installed") && !strings.Contains(string(out), "not-installed") {
		t.Fatalf("sidemirror is already installed here (%s); this test would replace it: remove it first", out)
	}
	deb := filepath.Join(built(t), "sidemirror_9.8.7+2.gabcdef0-1_amd64.deb")
	out := mustRun(t, "dpkg", "-i", deb)
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "sidemirror").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge sidemirror: %v\n%s", err, out)
		}
		if _, err := os.Stat("/usr/bin/sidemirror"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("/usr/bin/sidemirror is still there after the purge (%v)", err)
		}
	})
	if !strings.Contains(out, "systemctl enable --now sidemirror") {
		t.Errorf("dpkg -i printed no next step:\n%s", out)
	}

	if got := mustRun(t, "/usr/bin/sidemirror", "version"); got != "sidemirror v9.8.7-2-gabcdef0 (commit abcdef0)\n" {
		t.Errorf("sidemirror version printed %q", got)
	}
	if got := mustRun(t, "/usr/bin/kafka-cluster-mirrors", "--version"); !strings.Contains(got, "v9.8.7-2-gabcdef0") {
		t.Errorf("kafka-cluster-mirrors --version printed %q", got)
	}
	if got := mustRun(t, "id", "-un", "sidemirror"); got != "sidemirror\n" {
		t.Errorf("id sidemirror: %q", got)
	}
	for path, want := range map[string]string{
		"/etc/sidemirror":                            "750 root sidemirror",
		"/etc/sidemirror/sidecar.properties":         "640 root sidemirror",
		"/etc/default/sidemirror":                    "644 root root",
		"/usr/lib/systemd/system/sidemirror.service": "644 root root",
	} {
		if got := strings.TrimSpace(mustRun(t, "stat", "-c", "%a %U %G", path)); got != want {
			t.Errorf("%s: mode and owners %q, want %q", path, got, want)
		}
	}
	// The installed example config is a valid config as shipped.
	cfg := mustRun(t, "cat", "/etc/sidemirror/sidecar.properties")
	if !strings.Contains(cfg, "local.broker.id=") {
		t.Errorf("the installed config has no local.broker.id:\n%s", cfg)
	}
	// systemd-analyze verify exits 0 on warnings such as an unknown key:
	// any output fails the test.
	cmd := exec.Command("systemd-analyze", "verify", "/usr/lib/systemd/system/sidemirror.service")
	vout, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(vout)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, vout)
	}
}
