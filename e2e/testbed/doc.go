// Package testbed runs real Apache Kafka clusters on this machine for the
// end-to-end tests of sidemirror.
//
// Kafka's jars are resolved with Maven from Maven Central (Resolve) and
// cached under the user's home directory, so a second run downloads nothing.
// StartCluster formats and starts KRaft clusters of combined broker and
// controller nodes, waits until every node serves metadata, and gives
// per-node Stop, Start, Kill, Freeze and Thaw for fault tests; StartSidecars
// runs one sidemirror sidecar beside each destination node; StartMirrorMaker
// runs Kafka's MirrorMaker 2 (dedicated mode, its jars resolved the same way
// by ResolveMirrorMaker) for the comparisons of e2e/failover and e2e/cmd/bench. Each process's
// output goes to a log file whose tail a failing test prints.
//
// # Two beds
//
// The loopback bed (the default) binds every node and sidecar to free
// ports of 127.0.0.1: fast, and what most tests use.
//
// The multi-host bed (EnvOptions.MultiHost) runs every node, and the
// sidecar beside each destination node, in a host of its own: a Linux
// network namespace with its own address on a bridge of the root namespace
// (Network, Host), on the standard ports (9092 broker, 9093 controller,
// 9191-9193 sidecar, bound on every interface with the host's address
// advertised, as docs/installation.md configures three hosts). Source nodes get a second client listener, REMOTE,
// that advertises a Proxy in the test process: the destination's hosts
// reach the source only through those proxies (Cluster.RemoteBootstrap),
// while the tests reach every node directly (Cluster.Bootstrap). Faults:
// Host.Isolate (link down), Network.Partition (two hosts cut apart),
// Network.PartitionPorts (the same for some TCP ports only, ip rule
// blackholes) and SidecarGroup.CutOff (a sidecar cut off from the others
// on the admin and raft ports, brokers untouched),
// Host.LimitBandwidth (tc tbf; the kernel has no netem), and, on the path
// from the destination to the source, Env.SetSourceLatency, CutSource and
// BlackholeSource; Proxy.Traffic and Host.LinkTraffic measure what crossed
// a link. A node's log directory can live on a small tmpfs of its own
// (ClusterOptions.LogDirTmpfsMB) that Node.FillLogDir fills to the last
// byte and FreeLogDir frees. It needs root and iproute2 (ip, tc).
//
// # Nothing outlives a test
//
// Every process (JVM, sidecar, a helper in a host) is started in its own
// process group with SIGKILL as its parent-death signal (startProcess); in a
// host it runs through `ip netns exec`, which execs it in place and keeps
// both. Main stops the clusters when the tests end and kills them when the
// process is interrupted. Every name of a Network starts with
// "sm<pid><letter>-"; Network.Close removes them all, so does the reaper
// (reaper.go) when the test process panics or is killed with SIGKILL, and
// NewNetwork removes what a dead run left when even the reaper could not.
// leak_test.go checks all of it for failing, panicking, interrupted and
// killed test processes on both beds.
//
// Main is meant for TestMain: it starts a source and a destination cluster
// once per test package.
//
// # Files
//
//	env.go      Env, EnvOptions and Main: both clusters (and sidecars) of a test package
//	cluster.go  Cluster and Node: formatting, configuring and running KRaft nodes
//	sidecar.go  SidecarGroup and Sidecar: building and running the sidemirror daemons
//	kafka.go    resolving Kafka's jars with Maven into the cache
//	mm2dist.go  resolving MirrorMaker 2's jars (connect-mirror, connect-runtime) the same way
//	mm2.go      MirrorMaker: a dedicated-mode MirrorMaker 2 JVM and its mm2.properties
//	process.go  starting processes that die with the test process; KillAll
//	clients.go  franz-go options, client properties and kcat arguments per cluster
//	kcat.go     Kcat, DumpPartition and ComparePartition: reading partitions with kcat, an independent client
//	cli.go      RunCLI: one run of the kafka-cluster-mirrors binary, its output and exit code
//	measure.go  end offsets, CPU of sidecars, nodes and processes, summed metrics, peak RSS
//	netns.go    Network and Host: the bridge, the namespaces, stale-run cleanup
//	reaper.go   the process that removes a crashed run's network
//	faults.go   network faults of the multi-host bed, Node.Freeze and Thaw, source faults of an Env
//	disk.go     tmpfs log directories (ClusterOptions.LogDirTmpfsMB), Node.FillLogDir and FreeLogDir
//	tls.go      SecureListeners (SASL_SSL with SCRAM, mTLS, OAUTHBEARER listeners) and PKI (certificates, stores, a sidecar's peer TLS keys)
//	proxy.go    Proxy: a TCP proxy with latency, cut, blackhole and byte counts
//	ports.go    free loopback ports for the loopback bed, below the ephemeral range
//	doc.go      this overview
package testbed
