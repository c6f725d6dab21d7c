// Package testbed runs real Apache Kafka clusters on this machine for the
// end-to-end tests of sidemirror.
//
// Kafka's jars are resolved with Maven from Maven Central (Resolve) and
// cached under the user's home directory, so a second run downloads nothing.
// StartCluster formats and starts KRaft clusters of combined broker and
// controller nodes on free loopback ports, waits until every node serves
// metadata, and gives per-node Stop, Start and Kill for fault tests. Each
// node's output goes to a log file whose tail a failing test prints.
//
// No JVM outlives the test process: every Java process is started with a
// parent-death signal (SIGKILL) in its own process group, Main stops the
// clusters when the tests end or the process is interrupted, and Cluster.Close
// kills what does not stop in time.
//
// Main is meant for TestMain: it starts a source and a destination cluster
// once per test package.
//
// Files:
//
//	doc.go      this overview
//	kafka.go    the Kafka release and its jars (Resolve, through Maven)
//	cluster.go  Cluster: KRaft clusters of combined nodes, per-node Stop, Start, Kill
//	clients.go  franz-go options and users for a cluster
//	env.go      Env and Main: the clusters (and sidecars) of a test package
//	sidecar.go  the sidemirror binaries and SidecarGroup: sidecars beside the destination's brokers
//	process.go  the processes the bed starts, none outliving the tests
//	measure.go  measurements: end offsets, CPU, memory, metrics
package testbed
