package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

func testConfig(t *testing.T, dataDir string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.LocalBrokerID = 1
	cfg.LocalBootstrapServers = []string{"127.0.0.1:9092"}
	cfg.Destination.BootstrapServers = cfg.LocalBootstrapServers
	cfg.DataDir = dataDir
	cfg.HTTPListener = "127.0.0.1:0"
	return cfg
}

// running is a Sidecar whose Run executes in the background.
type running struct {
	sc   *Sidecar
	stop context.CancelFunc
	done chan error
}

func startSidecar(t *testing.T, cfg Config) *running {
	t.Helper()
	sc, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{sc: sc, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return r
}

// waitReady waits until the sidecar has bound its listeners, failing fast
// if Run returns instead.
func (r *running) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-r.sc.Ready():
	case err := <-r.done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("sidecar not ready after 10s")
	}
}

// runErr runs a sidecar that is expected to fail at start.
func runErr(t *testing.T, cfg Config) error {
	t.Helper()
	sc, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = sc.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run blocked instead of failing at start")
	}
	return err
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestSidecarRun(t *testing.T) {
	dataDir := t.TempDir() + "/data" // absent: Run creates it
	r := startSidecar(t, testConfig(t, dataDir))
	r.waitReady(t)
	base := "http://" + r.sc.HTTPAddr()

	if st, err := os.Stat(dataDir); err != nil || !st.IsDir() || st.Mode().Perm()&^0o750 != 0 {
		t.Errorf("data.dir: stat = %v, %v; want a directory with mode 0750 (less the umask)", st, err)
	}

	t.Run("healthz", func(t *testing.T) {
		if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz = %d %q, want 200 \"ok\\n\"", code, body)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		code, body := get(t, base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics = %d", code)
		}
		for _, want := range []string{
			"go_goroutines ",
			"process_start_time_seconds",
			fmt.Sprintf(`sidemirror_build_info{commit=%q,version=%q} 1`, Commit, Version),
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})

	t.Run("status page", func(t *testing.T) {
		// The sampler's first answer: this sidecar alone leads its raft
		// group, and no mirror exists.
		testwait.For(t, 20*time.Second, "the status page to show this sidecar as the raft leader", func() bool {
			code, body := get(t, base+"/")
			return code == http.StatusOK && strings.Contains(body, "raft leader (this sidecar)") &&
				strings.Contains(body, "raft leader: broker 1") && strings.Contains(body, "No mirrors yet")
		})
		if code, _ := get(t, base+"/nothing-here"); code != http.StatusNotFound {
			t.Errorf("GET /nothing-here = %d, want 404", code)
		}
	})

	t.Run("second sidecar on the same data dir", func(t *testing.T) {
		cfg := testConfig(t, dataDir)
		err := runErr(t, cfg)
		if !errors.Is(err, ErrDataDirLocked) {
			t.Fatalf("Run = %v, want ErrDataDirLocked", err)
		}
		for _, want := range []string{dataDir, fmt.Sprintf("PID %d", os.Getpid())} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})

	t.Run("http.listener in use", func(t *testing.T) {
		cfg := testConfig(t, t.TempDir())
		cfg.HTTPListener = r.sc.HTTPAddr()
		err := runErr(t, cfg)
		if !errors.Is(err, ErrListen) {
			t.Fatalf("Run = %v, want ErrListen", err)
		}
		for _, want := range []string{"http.listener", cfg.HTTPListener} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})

	t.Run("cancel stops Run promptly and releases the lock", func(t *testing.T) {
		r.stop()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run = %v, want nil after cancel", err)
			}
			r.done <- err // for the cleanup
		case <-time.After(shutdownTimeout + time.Second):
			t.Fatal("Run did not return after cancel")
		}
		testwait.For(t, 5*time.Second, "HTTP listener to close", func() bool {
			_, err := http.Get(base + "/healthz")
			return err != nil
		})
		again := startSidecar(t, testConfig(t, dataDir))
		again.waitReady(t)
	})
}

func TestSidecarRunTwice(t *testing.T) {
	r := startSidecar(t, testConfig(t, t.TempDir()))
	r.waitReady(t)
	if err := r.sc.Run(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second Run = %v, want ErrAlreadyStarted", err)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(t, "relative/dir")
	if _, err := New(cfg, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "data.dir") {
		t.Errorf("New = %v, want an error naming data.dir", err)
	}
}

func TestRoutinesRefuseAfterStop(t *testing.T) {
	r := newRoutines(zaptest.NewLogger(t))
	ran := make(chan struct{})
	if !r.Go("first", func() { close(ran) }) {
		t.Fatal("Go refused before stop")
	}
	<-ran
	r.stop()
	if r.Go("late", func() { t.Error("a goroutine started after stop") }) {
		t.Error("Go started a goroutine after stop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.wait(ctx); err != nil {
		t.Errorf("wait = %v", err)
	}
}
