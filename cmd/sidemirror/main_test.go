package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/statestore"
)

const (
	testVersion = "1.2.3-test"
	testCommit  = "abc1234"
)

// buildBinary builds sidemirror with a version set through -ldflags.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sidemirror")
	pkg := "github.com/sidemirror/sidemirror/sidecar"
	cmd := exec.Command("go", "build", "-o", bin,
		"-ldflags", fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s", pkg, testVersion, pkg, testCommit), ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sidecar.properties")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("running the binary: %v", err)
		return -1
	}
}

// lockedBuffer collects output written by one goroutine and read by another.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// destBase is the least configuration that loads, for cases that add
// destination.* keys.
const destBase = "local.broker.id=1\nlocal.bootstrap.servers=127.0.0.1:9092\ndata.dir=/tmp/x\n"

func TestBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(bin, "version").Output()
		if code := exitCode(t, err); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		if want := "sidemirror " + testVersion + " (commit " + testCommit + ")\n"; string(out) != want {
			t.Errorf("version printed %q, want %q", out, want)
		}
	})

	badConfigs := []struct {
		name, text, key, value string
	}{
		{"typo key", "locl.broker.id=1\n", "locl.broker.id", `did you mean "local.broker.id"?`},
		{"bad broker id", "local.broker.id=abc\nlocal.bootstrap.servers=127.0.0.1:9092\ndata.dir=/tmp/x\n", "local.broker.id", `"abc"`},
		{"missing required key", "local.broker.id=1\ndata.dir=/tmp/x\n", "local.bootstrap.servers", ""},
		{"loopback advertised admin address in a group across hosts",
			"local.broker.id=1\nlocal.bootstrap.servers=127.0.0.1:9092\ndata.dir=/tmp/x\nadmin.listener=:9191\nadmin.advertised.listener=127.0.0.1:9191\n" +
				"raft.listener=:9192\nraft.peers=1@10.0.0.1:9192,2@10.0.0.2:9192,3@10.0.0.3:9192\n",
			"admin.advertised.listener", `"127.0.0.1:9191" is a loopback address`},
		// The destination client's settings that Kafka has and sidemirror
		// does not: refused at start, naming the key.
		{"destination Kerberos", destBase + "destination.security.protocol=SASL_SSL\ndestination.sasl.mechanism=GSSAPI\n" +
			"destination.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n",
			"destination.sasl.mechanism", `"GSSAPI" (Kerberos) is not supported`},
		{"destination key store type", destBase + "destination.security.protocol=SSL\ndestination.ssl.keystore.type=BCFKS\n" +
			"destination.ssl.keystore.location=/etc/sidemirror/sidecar.bcfks\n",
			"destination.ssl.keystore.type", `"BCFKS" is not supported`},
		{"destination OAUTHBEARER without a token endpoint", destBase + "destination.security.protocol=SASL_SSL\ndestination.sasl.mechanism=OAUTHBEARER\n" +
			"destination.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
			"destination.sasl.oauthbearer.token.endpoint.url", "unsecured tokens are not supported"},
		{"destination login callback handler", destBase + "destination.security.protocol=SASL_SSL\ndestination.sasl.mechanism=OAUTHBEARER\n" +
			"destination.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n" +
			"destination.sasl.login.callback.handler.class=com.example.CustomLoginHandler\n" +
			"destination.sasl.oauthbearer.token.endpoint.url=https://idp.example.com/token\n",
			"destination.sasl.login.callback.handler.class", `"com.example.CustomLoginHandler" is not supported`},
	}
	for _, tc := range badConfigs {
		t.Run("bad config: "+tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "run", "--config", writeConfig(t, tc.text))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if code := exitCode(t, cmd.Run()); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
				t.Errorf("stderr is not exactly one line:\n%s", msg)
			}
			if !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.value) {
				t.Errorf("stderr %q does not name %q and %q", msg, tc.key, tc.value)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout is not empty: %q", stdout.String())
			}
		})
	}

	// Key and trust stores are read when the sidecar starts: one that does
	// not load is a bad configuration too (exit code 2, not restarted by
	// systemd), naming its key.
	for key, extra := range map[string]string{
		"destination.ssl.keystore.location": "destination.security.protocol=SSL\ndestination.ssl.keystore.type=PKCS12\n" +
			"destination.ssl.keystore.location=/nonexistent/mirror.p12\ndestination.ssl.keystore.password=changeit\n",
		"peer.ssl.keystore.location": "peer.security.protocol=SSL\npeer.ssl.keystore.location=/nonexistent/peer.pem\n" +
			"peer.ssl.truststore.location=/nonexistent/ca.pem\n",
	} {
		t.Run("store that does not load: "+key, func(t *testing.T) {
			dir := t.TempDir()
			text := fmt.Sprintf("local.broker.id=1\nlocal.bootstrap.servers=127.0.0.1:1\ndata.dir=%s\n"+
				"admin.listener=127.0.0.1:0\nraft.listener=127.0.0.1:0\nhttp.listener=127.0.0.1:0\nraft.peers=1@127.0.0.1:1\n%s",
				filepath.Join(dir, "data"), extra)
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "run", "--config", writeConfig(t, text))
			cmd.Stderr = &stderr
			if code := exitCode(t, cmd.Run()); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "sidemirror: config: "+key+": cannot read /nonexistent/") {
				t.Errorf("stderr does not name %s:\n%s", key, stderr.String())
			}
		})
	}

	for _, tc := range badConfigs {
		t.Run("state dump with a bad config: "+tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "state", "dump", "--config", writeConfig(t, tc.text))
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if code := exitCode(t, cmd.Run()); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.key) {
				t.Errorf("stderr is not one line naming %q:\n%s", tc.key, msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout is not empty: %q", stdout.String())
			}
		})
	}

	t.Run("state dump", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cfg := writeConfig(t, strings.Join([]string{
			"local.broker.id=1",
			"local.bootstrap.servers=" + strings.Join(c.ListenAddrs(), ","),
			"data.dir=" + t.TempDir(),
		}, "\n"))
		dump := func() (stdout, stderr string, code int) {
			var o, e bytes.Buffer
			cmd := exec.Command(bin, "state", "dump", "--config", cfg)
			cmd.Stdout, cmd.Stderr = &o, &e
			code = exitCode(t, cmd.Run())
			return o.String(), e.String(), code
		}

		// No topic yet: a runtime error.
		if out, errOut, code := dump(); code != 1 || out != "" || !strings.Contains(errOut, statestore.TopicName) {
			t.Fatalf("dump without the topic: exit %d, stdout %q, stderr %q; want exit 1 naming the topic", code, out, errOut)
		}

		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		st, err := statestore.New(cl, statestore.NumPartitions(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		if err := st.EnsureTopic(ctx); err != nil {
			t.Fatal(err)
		}
		key := statestore.PartitionStateKey("my-mirror", "orders", 0)
		err = st.Write(ctx, statestore.PartitionFor("my-mirror", 3), []statestore.Record{
			{Key: key, Value: &statestore.PartitionState{State: statestore.StateMirroring, LastSourceOffset: 5}},
			{Key: key, Value: nil},
		})
		if err != nil {
			t.Fatal(err)
		}

		out, errOut, code := dump()
		if code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("dump printed %d lines, want 2:\n%s", len(lines), out)
		}
		var first, second struct {
			Key   struct{ Mirror string }
			Value map[string]any
		}
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Key.Mirror != "my-mirror" || first.Value["state"] != "MIRRORING" {
			t.Errorf("first line %s: %v; want my-mirror MIRRORING", lines[0], err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &second); err != nil || second.Value != nil {
			t.Errorf("second line %s: %v; want a null value", lines[1], err)
		}
	})

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run("run until "+map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig], func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			cfg := writeConfig(t, strings.Join([]string{
				"local.broker.id=1",
				"local.bootstrap.servers=127.0.0.1:9092",
				"data.dir=" + dataDir,
				"admin.listener=127.0.0.1:0",
				"raft.listener=127.0.0.1:0",
				"http.listener=127.0.0.1:0",
				"destination.security.protocol=SASL_PLAINTEXT",
				`destination.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="sm" password="hunter2-secret";`,
			}, "\n"))
			cmd := exec.Command(bin, "run", "--config", cfg)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			// Read the JSON log lines; the daemon logs the bound HTTP address.
			var logs lockedBuffer
			addrc := make(chan string, 1)
			scanned := make(chan struct{})
			go func() {
				defer close(scanned)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					fmt.Fprintln(&logs, sc.Text())
					var entry struct {
						Msg  string `json:"msg"`
						Addr string `json:"http-address"`
					}
					if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Addr != "" {
						addrc <- entry.Addr
					}
				}
			}()
			var addr string
			select {
			case addr = <-addrc:
			case <-scanned:
				t.Fatalf("the daemon exited before logging its HTTP address:\n%s", logs.String())
			case <-time.After(10 * time.Second):
				t.Fatalf("no http-address logged within 10s:\n%s", logs.String())
			}

			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				t.Fatalf("GET /healthz: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz = %d, want 200", resp.StatusCode)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() {
				<-scanned // Wait must not close the pipe before the reader is done
				exited <- cmd.Wait()
			}()
			select {
			case err := <-exited:
				if code := exitCode(t, err); code != 0 {
					t.Errorf("exit code %d after %v, want 0; logs:\n%s", code, sig, logs.String())
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the daemon did not exit within 5s of %v; logs:\n%s", sig, logs.String())
			}

			out := logs.String()
			if strings.Contains(out, "hunter2-secret") {
				t.Errorf("the logs reveal the password:\n%s", out)
			}
			for _, want := range []string{`"destination.sasl.jaas.config":"[hidden]"`, `"version":"` + testVersion + `"`, "sidemirror stopped"} {
				if !strings.Contains(out, want) {
					t.Errorf("the logs lack %s:\n%s", want, out)
				}
			}
		})
	}
}
