// Command testbed resolves Apache Kafka's jars and runs the local clusters of
// the end-to-end test bed by hand.
//
//	testbed fetch   resolve the Kafka jars, and MirrorMaker 2's (connect-mirror,
//	                for make failover-compare), into the cache (a no-op when cached)
//	testbed up      start a source and a destination cluster, print their
//	                addresses and wait for Ctrl-C (or -duration); -multihost
//	                runs every node in a network namespace of its own (root)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	progress := func(s string) { fmt.Fprintln(os.Stderr, "testbed:", s) }
	switch os.Args[1] {
	case "fetch":
		d, err := testbed.Resolve(ctx, testbed.KafkaVersion(), progress)
		if err != nil {
			fail(err)
		}
		fmt.Printf("Apache Kafka %s jars in %s\n", d.Version, d.LibDir)
		m, err := testbed.ResolveMirrorMaker(ctx, testbed.KafkaVersion(), progress)
		if err != nil {
			fail(err)
		}
		fmt.Printf("MirrorMaker 2 %s jars in %s\n", m.Version, m.LibDir)
	case "up":
		fs := flag.NewFlagSet("up", flag.ExitOnError)
		duration := fs.Duration("duration", 0, "stop after this long (0: wait for Ctrl-C)")
		sidecars := fs.Bool("sidecars", false, "also build and start one sidecar per destination node")
		multihost := fs.Bool("multihost", false, "run every node (and sidecar) in a network namespace of its own, the source behind proxies (needs root and iproute2)")
		_ = fs.Parse(os.Args[2:])
		opts := testbed.DefaultEnvOptions()
		if *sidecars {
			opts.Sidecars = true
			opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true", "log.level": "info"}
		}
		opts.MultiHost = *multihost
		env, err := testbed.StartEnv(ctx, opts, progress)
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(env.Dir)
		defer env.Close()
		printEnv(env)
		if *duration > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(*duration):
			}
		} else {
			<-ctx.Done()
		}
		fmt.Fprintln(os.Stderr, "testbed: stopping clusters")
	default:
		usage()
	}
}

func printEnv(env *testbed.Env) {
	fmt.Printf("Apache Kafka %s, data and logs under %s\n\n", env.Dist.Version, env.Dir)
	if env.Net != nil {
		fmt.Printf("multi-host bed: the root namespace is %s on the bridge\n", env.Net.Gateway())
		for _, h := range env.Net.Hosts() {
			fmt.Printf("  host %s: %s (ip netns exec %s ...)\n", h.Name, h.IP, h.Namespace())
		}
		fmt.Println()
	}
	fmt.Printf("source cluster %s\n  bootstrap.servers=%s\n  security.protocol=%s\n",
		env.Source.ID(), env.Source.Bootstrap(), env.Source.SecurityProtocol())
	if env.Net != nil {
		fmt.Printf("  from the destination's hosts (through the proxies): bootstrap.servers=%s\n", env.Source.RemoteBootstrap())
	}
	fmt.Println()
	fmt.Printf("destination cluster %s\n  bootstrap.servers=%s\n  security.protocol=%s\n  sasl.mechanism=PLAIN\n",
		env.Destination.ID(), env.Destination.Bootstrap(), env.Destination.SecurityProtocol())
	for _, u := range testbed.Users {
		path := filepath.Join(env.Dir, u.Name+".properties")
		if err := env.Destination.WriteClientProperties(path, u); err != nil {
			fail(err)
		}
		fmt.Printf("  client properties for user %s: %s\n", u.Name, path)
	}
	if env.Sidecars != nil {
		fmt.Printf("\nsidecars (admin endpoints, for kafka-cluster-mirrors --bootstrap-server)\n  %s\n", env.Sidecars.AdminBootstrap())
		for _, s := range env.Sidecars.Sidecars() {
			fmt.Printf("  sidecar %d: admin %s, metrics http://%s/metrics, log %s\n", s.BrokerID, s.AdminAddr, s.HTTPAddr, s.LogPath())
		}
	}
	fmt.Println("\nPress Ctrl-C to stop.")
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testbed fetch | testbed up [-duration 1m] [-sidecars] [-multihost]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
