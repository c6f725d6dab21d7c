// Command demo shows sidemirror at work on this machine: it starts a source
// and a three-node destination Kafka cluster with one sidecar per
// destination broker, creates a mirror with kafka-cluster-mirrors, starts a
// topic that a producer keeps writing, and prints --describe until the lag
// has drained to 0. Then it shows that the mirror topic is read-only and
// waits for Ctrl-C (or -duration). It prints the status page of the first
// sidecar (http.listener, "/") at the start: open it to watch the lag
// drain.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

const (
	mirror = "demo"
	topic  = "orders"
)

func main() {
	duration := flag.Duration("duration", 0, "stop this long after the lag drained (0: wait for Ctrl-C)")
	backlog := flag.Int("backlog", 200_000, "records written before mirroring starts")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *backlog, *duration); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, backlog int, duration time.Duration) error {
	say("starting a source cluster, a 3-node destination cluster and 3 sidecars")
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true", "log.level": "info"}
	env, err := testbed.StartEnv(ctx, opts, func(s string) { say(s) })
	if err != nil {
		return err
	}
	defer os.RemoveAll(env.Dir)
	defer env.Close()
	fmt.Printf("\n  source      %s\n  destination %s (SASL/PLAIN)\n  sidecars    %s\n  status page http://%s/\n  logs        %s\n\n",
		env.Source.Bootstrap(), env.Destination.Bootstrap(), env.Sidecars.AdminBootstrap(), env.Sidecars.Sidecars()[0].HTTPAddr, env.Dir)

	src, err := env.Source.NewClient(testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := kadm.NewClient(src).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		return err
	}
	say(fmt.Sprintf("writing a backlog of %d records to %s on the source", backlog, topic))
	var seq atomic.Int64
	write := func(n int) error {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			k := seq.Add(1)
			recs[i] = &kgo.Record{Key: []byte("order-" + strconv.FormatInt(k, 10)), Value: []byte(fmt.Sprintf(`{"id":%d,"amount":%d}`, k, k%997))}
		}
		return src.ProduceSync(ctx, recs...).FirstErr()
	}
	for left := backlog; left > 0; left -= 10_000 {
		if err := write(min(left, 10_000)); err != nil {
			return err
		}
	}

	cfg := filepath.Join(env.Dir, "mirror.properties")
	if err := os.WriteFile(cfg, []byte("bootstrap.servers="+env.Source.Bootstrap()+"\n"), 0o600); err != nil {
		return err
	}
	cli := func(args ...string) error {
		args = append([]string{"--bootstrap-server", env.Sidecars.AdminBootstrap()}, args...)
		fmt.Printf("$ kafka-cluster-mirrors %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, env.Bin.CLI, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	if err := cli("--create", "--mirror", mirror, "--mirror-config", cfg); err != nil {
		return err
	}

	// A producer keeps writing while the mirror catches up.
	pctx, stopProducer := context.WithCancel(ctx)
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		for pctx.Err() == nil {
			if err := write(200); err != nil && pctx.Err() == nil {
				say("producer: " + err.Error())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if err := cli("--start", "--topics", topic, "--mirror", mirror); err != nil {
		stopProducer()
		return err
	}
	for i := 0; i < 5; i++ {
		time.Sleep(2 * time.Second)
		if err := cli("--describe", "--mirror", mirror); err != nil {
			stopProducer()
			return err
		}
	}
	say("stopping the producer; the lag drains to 0")
	stopProducer()
	<-producerDone
	deadline := time.Now().Add(2 * time.Minute)
	for {
		time.Sleep(2 * time.Second)
		lagged, err := totalLag(ctx, env)
		if err != nil {
			return err
		}
		if lagged == 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cli("--describe", "--mirror", mirror)
			return fmt.Errorf("the destination still lags %d records behind the source 2 minutes after the producer stopped", lagged)
		}
	}
	if err := cli("--describe", "--mirror", mirror); err != nil {
		return err
	}
	count := func(c *testbed.Cluster, user testbed.User) (int, error) {
		out, err := exec.CommandContext(ctx, "kcat", append(c.KcatArgs(user),
			"-C", "-t", topic, "-e", "-q", "-f", "%o\n")...).Output()
		if err != nil {
			return 0, fmt.Errorf("kcat: %w", err)
		}
		return strings.Count(string(out), "\n"), nil
	}
	onSource, err := count(env.Source, testbed.Admin)
	if err != nil {
		return err
	}
	say(fmt.Sprintf("kcat reads %d records from the source", onSource))
	onDest, err := count(env.Destination, testbed.Alice)
	if err != nil {
		return err
	}
	say(fmt.Sprintf("kcat reads %d records from the destination as user alice", onDest))
	if onDest != onSource {
		return fmt.Errorf("the destination holds %d records, the source %d", onDest, onSource)
	}
	dst, err := env.Destination.NewClient(testbed.Alice, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1))
	if err != nil {
		return err
	}
	defer dst.Close()
	err = dst.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		say("alice's write to the mirror topic is refused: TOPIC_AUTHORIZATION_FAILED (read-only until failover)")
	} else {
		say(fmt.Sprintf("alice's write to the mirror topic returned %v", err))
	}
	if duration > 0 {
		say(fmt.Sprintf("stopping in %v", duration))
		select {
		case <-ctx.Done():
		case <-time.After(duration):
		}
		return nil
	}
	say("everything keeps running; press Ctrl-C to stop")
	<-ctx.Done()
	return nil
}

// totalLag sums the destination's distance to the source's end offsets.
func totalLag(ctx context.Context, env *testbed.Env) (int64, error) {
	s, err := env.Source.EndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	d, err := env.Destination.EndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, o := range s {
		lag += o - d[p]
	}
	return lag, nil
}

func say(s string) { fmt.Printf("demo: %s\n", s) }
