package statuspage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

const (
	repoRoot   = "../.."
	screenshot = "docs/status-page.png" // in repoRoot
	width      = 1280
	height     = 760
)

var wait = testwait.Every(500 * time.Millisecond)

// demoRun is the demo running in the background: its output so far, and
// the status page address it printed.
type demoRun struct {
	mu   sync.Mutex
	out  bytes.Buffer
	url  string
	done chan struct{}
}

func (d *demoRun) write(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.out.WriteString(line + "\n")
	if m := regexp.MustCompile(`^\s+status page (http://\S+/)$`).FindStringSubmatch(line); m != nil {
		d.url = m[1]
	}
}

func (d *demoRun) statusURL() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.url
}

// startDemo builds and runs the demo with a backlog large enough to watch
// it drain; it is interrupted (Ctrl-C) at test end.
func startDemo(t *testing.T) *demoRun {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", bin, "./e2e/cmd/demo")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-backlog", "1500000", "-duration", "10m")
	cmd.Dir = repoRoot
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &demoRun{done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.write(sc.Text())
		}
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(d.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-d.done
			t.Error("the demo did not stop within a minute of Ctrl-C")
		}
		if t.Failed() {
			d.mu.Lock()
			t.Logf("demo output:\n%s", d.out.String())
			d.mu.Unlock()
		}
	})
	return d
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(body)
}

var (
	rowRe      = regexp.MustCompile(`<td>orders</td><td class="n">(\d+)</td><td class="state">MIRRORING</td>`)
	mirrorLag  = regexp.MustCompile(`lag <b class="lag">(\d+)</b> records <svg class="spark"[^>]*><title>lag since [^,]+, peak (\d+)</title><polyline points="([^"]*)"/>`)
	chromeArgs = []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage",
		fmt.Sprintf("--window-size=%d,%d", width, height)}
)

// TestStatusPageScreenshot runs the demo and watches its status page: the
// mirror and its three partitions appear, the mirror's lag rises above 0
// and drains to 0 (its sparkline holds at least 10 samples, the drain and
// the time at 0 after it), and headless Chromium renders the page to a screenshot of the
// window's size and to a DOM with the same mirror and partitions.
func TestStatusPageScreenshot(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: scripts/setup.sh installs Debian's chromium package")
	}
	d := startDemo(t)
	wait.For(t, 5*time.Minute, "the demo to print its status page address", func() bool {
		select {
		case <-d.done:
			t.Fatal("the demo exited")
		default:
		}
		return d.statusURL() != ""
	})
	url := d.statusURL()
	t.Logf("status page %s", url)

	// Watching the page keeps its sampler at its fast pace. The lag peaks
	// while the backlog is mirrored, then drains to 0.
	var peak int64
	wait.For(t, 5*time.Minute, "the demo's mirror with its 3 partitions MIRRORING and a lag above 0", func() bool {
		body := get(url)
		m := mirrorLag.FindStringSubmatch(body)
		if m == nil || len(rowRe.FindAllString(body, -1)) != 3 {
			return false
		}
		fmt.Sscan(m[2], &peak)
		return peak > 0
	})
	var points int
	wait.For(t, 5*time.Minute, "the lag to drain to 0", func() bool {
		m := mirrorLag.FindStringSubmatch(get(url))
		if m == nil {
			return false
		}
		fmt.Sscan(m[2], &peak)
		points = len(strings.Fields(m[3]))
		return m[1] == "0" && points >= 10
	})
	t.Logf("the mirror's lag drained to 0 from a peak of %d records; its sparkline has %d samples", peak, points)

	// Chromium renders the page.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, err := exec.CommandContext(ctx, chromium, append(chromeArgs, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{"sidecar of broker 1", `<h3>demo</h3>`, "raft leader"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("the page Chromium rendered lacks %q:\n%s", want, dom)
		}
	}
	if n := len(rowRe.FindAllString(string(dom), -1)); n != 3 {
		t.Errorf("the page Chromium rendered has %d MIRRORING partitions of orders, want 3", n)
	}
	shot := filepath.Join(t.TempDir(), "status-page.png")
	cmd := exec.CommandContext(ctx, chromium, append(chromeArgs, "--screenshot="+shot, url)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Errorf("the screenshot is %dx%d, want the window's %dx%d", b.Dx(), b.Dy(), width, height)
	}
	// A rendered page is not one colour: count the distinct pixels.
	colours := map[uint32]bool{}
	for y := 0; y < height; y += 4 {
		for x := 0; x < width; x += 4 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(colours) < 10 {
		t.Errorf("the screenshot has %d colours: a blank page?", len(colours))
	}
	t.Logf("screenshot %dx%d, %d bytes, %d colours", img.Bounds().Dx(), img.Bounds().Dy(), len(raw), len(colours))
	if os.Getenv("SIDEMIRROR_UPDATE_SCREENSHOT") != "" {
		if err := os.WriteFile(filepath.Join(repoRoot, screenshot), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", screenshot)
	}
}
