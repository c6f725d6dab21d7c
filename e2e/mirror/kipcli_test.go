package mirror

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sidemirror/sidemirror/e2e/testbed"
	"github.com/sidemirror/sidemirror/protocol"
)

// The headers of KIP-1279 section 8.2's tables, as the KIP prints them;
// kipTable lays rows out under them. --failed's is sidemirror's
// (docs/operations.md): the KIP names RETRY and ERROR but shows no table.
const (
	kipListHeader     = "MIRROR                         TOPICS     CLUSTER-ID                 BOOTSTRAP-SERVER"
	kipDescribeHeader = "MIRROR                         TOPIC                                    PARTITION  SOURCE-OFFSET   DESTINATION-OFFSET LAG      STATE"
	failedHeader      = kipDescribeHeader + "           RETRY         ERROR"
)

// kipTable lays rows out under header as the KIP's tables are: each cell
// starts where its column's title starts (a longer cell pushes the rest
// right, one space after it), the last cell is not padded.
func kipTable(header string, rows [][]string) string {
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	var b strings.Builder
	b.WriteString(header + "\n")
	for _, row := range rows {
		line := ""
		for i, cell := range row {
			if i > 0 {
				line += strings.Repeat(" ", max(1, starts[i]-len(line)))
			}
			line += cell
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// kipStep is one command of KIP-1279 section 8, with what it must print.
type kipStep struct {
	name string
	// args follow --bootstrap-server <destination broker> --command-config
	// <the destination's client settings>, as the KIP writes the command
	// (names and addresses substituted).
	args []string
	// run replaces the CLI for a command of another tool (Kafka's own
	// kafka-configs.sh against the source).
	run  func(t *testing.T) cliResult
	want func(t *testing.T) string // the whole stdout, computed when the step runs
	code int
	// poll: the command only reads; run it again until the output is as
	// wanted (lag and states settle), for up to a minute.
	poll bool
	// own: keep only the header and the rows of this test's mirrors (the
	// package's other tests may leave mirrors of their own).
	own           bool
	before, after func(t *testing.T)
}

// TestKIPCLICommands runs every command of KIP-1279 section 8 that the
// sidecars serve, as the KIP writes it: --bootstrap-server is a destination
// broker (":port", as the KIP's ":9094"), with the destination's SASL
// settings in --command-config, and the mirror, topic and principal names
// and the addresses are this test's. Each prints the KIP's output, byte for
// byte, with the values computed from what the test did and what
// independent clients read from the clusters. The steps build the KIP's
// describe example: a mirror with a MIRRORING and a STOPPED topic, another
// with a PAUSED one. Besides section 8.2 (create, start, list, describe,
// pause, resume, stop, delete), it covers section 8.3's kafka-configs.sh of
// a mirror and the source-side quota (Kafka's own tool against the source,
// on the fetcher's client ID, which then throttles the mirror), section
// 8.4's kafka-acls.sh commands (the bed's admin endpoint is PLAINTEXT, so
// they are stored, not enforced; e2e/adminsec TestKIPRoles enforces them),
// and the reference implementation's --describe --failed, --topics,
// --state, --json and --recover. Section 8.3's destination-side throttle
// (kafka-configs.sh --entity-type brokers and topics) is set on the
// owner of a partition, described, measured at 1 MB/s +-10% from the
// sidecar's appended bytes without a restart, checked to leave the
// partition that the throttled replicas do not list unthrottled, and
// deleted.
func TestKIPCLICommands(t *testing.T) {
	dumpLogs(t)
	const (
		m1, m2                   = "k8-my-mirror", "k8-new-mirror"
		us, eu, internal, myTopc = "k8-orders-us", "k8-orders-eu", "k8-orders-internal", "k8-my-topic"
	)
	cc := filepath.Join(t.TempDir(), "client.properties")
	if err := env.Destination.WriteClientProperties(cc, testbed.Admin); err != nil {
		t.Fatal(err)
	}
	nodes := env.Destination.Nodes()
	_, port, err := net.SplitHostPort(nodes[0].BrokerAddr)
	if err != nil {
		t.Fatal(err)
	}
	broker := ":" + port
	atBroker := func(t *testing.T, args ...string) cliResult {
		t.Helper()
		return cliAt(t, broker, append([]string{"--command-config", cc}, args...)...)
	}

	for topic, parts := range map[string]int32{us: 1, eu: 2, internal: 1, myTopc: 2} {
		createSourceTopic(t, topic, parts, nil)
		produceVariety(t, env.Source, topic, 300, uint64(parts)+81)
	}
	// The KIP's mirror.properties holds bootstrap.servers only; the other
	// mirror gets no automatic retries (its FAILED partition stays FAILED
	// until --recover) and no metadata sync round during the test (it would
	// put back the config the test changes to fail a partition).
	m1Config := mirrorConfigFile(t, nil)
	m2Config := mirrorConfigFile(t, map[string]string{"mirror.partition.retry.max.attempts": "0", "mirror.metadata.refresh.interval.ms": "3600000"})
	// The alter of section 8.3 sets bootstrap.servers to one address, as
	// the KIP does: the source's last node.
	m1Bootstrap := env.Source.Bootstrap()
	altered := env.Source.Nodes()[len(env.Source.Nodes())-1].BrokerAddr

	// The state the describe rows are computed from.
	mirrorTopics := map[string][]string{m1: {eu, us}, m2: {myTopc}}
	stateOf := map[string]string{eu: "MIRRORING", us: "MIRRORING", myTopc: "MIRRORING"}
	describeRows := func(t *testing.T, mirrors ...string) [][]string {
		t.Helper()
		var rows [][]string
		for _, m := range mirrors {
			for _, topic := range mirrorTopics[m] {
				src, dst := endOffsets(t, env.Source, topic), endOffsets(t, env.Destination, topic)
				for p := range int32(len(src)) {
					if st := stateOf[topic]; st != "MIRRORING" {
						rows = append(rows, []string{m, topic, strconv.Itoa(int(p)), "-", "-", "-", st})
						continue
					}
					rows = append(rows, []string{m, topic, strconv.Itoa(int(p)), strconv.FormatInt(src[p], 10),
						strconv.FormatInt(dst[p], 10), strconv.FormatInt(src[p]-dst[p], 10), "MIRRORING"})
				}
			}
		}
		return rows
	}
	describeWant := func(mirrors ...string) func(t *testing.T) string {
		return func(t *testing.T) string { return kipTable(kipDescribeHeader, describeRows(t, mirrors...)) }
	}
	listWant := func(t *testing.T) string {
		return kipTable(kipListHeader, [][]string{
			{m1, strconv.Itoa(len(mirrorTopics[m1])), env.Source.ID(), m1Bootstrap},
			{m2, strconv.Itoa(len(mirrorTopics[m2])), env.Source.ID(), env.Source.Bootstrap()},
		})
	}
	text := func(s string) func(*testing.T) string { return func(*testing.T) string { return s } }

	// The source-side quota of section 8.3 names the client ID of the
	// fetcher that drives orders-us: broker-<its broker>-fetcher-0-mirror-<mirror>.
	var fetcherClientID string
	// The broker whose sidecar the destination-side throttle of section
	// 8.3 is set on: the owner of k8-my-topic-0.
	var throttledBroker string
	top := t // the test, for cleanups that outlive a step
	// The sidecars' mirrored bytes of the other mirror before the throttle
	// is measured.
	var throttleBase map[int32]sidecarSample
	// The partition the test fails: its describe row, as the sidecars
	// give it in --json, and the config it changed.
	var failedRow protocol.PartitionDetail
	var oldMaxMessageBytes string

	destCl := newClient(t, env.Destination, testbed.Admin)
	adm := kadm.NewClient(destCl)
	setMaxMessageBytes := func(t *testing.T, v string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, myTopc)
		if err == nil {
			_, err = resp.On(myTopc, nil)
		}
		if err != nil {
			t.Fatalf("set max.message.bytes=%s on the destination's %s: %v", v, myTopc, err)
		}
	}
	maxMessageBytes := func(t *testing.T) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc, err := adm.DescribeTopicConfigs(ctx, myTopc)
		v := ""
		if err == nil {
			var c kadm.ResourceConfig
			if c, err = rc.On(myTopc, nil); err == nil {
				for _, e := range c.Configs {
					if e.Key == "max.message.bytes" {
						v = e.MaybeValue()
					}
				}
			}
		}
		if err != nil || v == "" {
			t.Fatalf("max.message.bytes of the destination's %s: %q, %v", myTopc, v, err)
		}
		return v
	}
	aclLines := func(principal string, ops ...string) string {
		var b strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&b, "      (principal=%s, host=*, operation=%s, permissionType=ALLOW)\n", principal, op)
		}
		return b.String()
	}
	adminOps := []string{"CREATE", "ALTER", "DESCRIBE", "DELETE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
	pattern := func(name string) string {
		return "`ResourcePattern(resourceType=CLUSTER_MIRROR, name=" + name + ", patternType=LITERAL)`"
	}
	t.Cleanup(func() { // the monitor's ACL on every mirror, if a step failed before removing it
		cli(t, "--remove-acl", "--cluster-mirror", "*", "--allow-principal", "User:monitor")
	})

	steps := []kipStep{
		{name: "8.2 create", args: []string{"--create", "--mirror", m1, "--mirror-config", m1Config}, want: text("Created mirror " + m1 + "\n")},
		{name: "8.2 create, another", args: []string{"--create", "--mirror", m2, "--mirror-config", m2Config}, want: text("Created mirror " + m2 + "\n")},
		{name: "8.2 start with --exclude", args: []string{"--start", "--topics", "k8-orders-.*", "--exclude", internal, "--mirror", m1},
			want: text("Started 2 mirror topic(s) in mirror " + m1 + ": [" + eu + ", " + us + "]\n")},
		{name: "8.2 start", args: []string{"--start", "--topics", myTopc, "--mirror", m2},
			want: text("Started 1 mirror topic(s) in mirror " + m2 + ": [" + myTopc + "]\n"),
			after: func(t *testing.T) {
				for _, topic := range []string{eu, us} {
					waitCaughtUp(t, m1, topic, 2*time.Minute)
				}
				waitCaughtUp(t, m2, myTopc, 2*time.Minute)
			}},
		{name: "8.2 list", args: []string{"--list"}, want: listWant, poll: true, own: true},
		{name: "8.2 describe", args: []string{"--describe"}, want: describeWant(m1, m2), poll: true, own: true},
		{name: "8.2 describe --mirror", args: []string{"--describe", "--mirror", m1}, want: describeWant(m1), poll: true},
		{name: "describe --topics --state", args: []string{"--describe", "--topics", "k8-orders-.*", "--state", "MIRRORING"},
			want: describeWant(m1), poll: true},
		// --json has no example in the KIP: its rows, laid out as the
		// table, must be the table's.
		{name: "describe --json", poll: true, want: describeWant(m2),
			run: func(t *testing.T) cliResult {
				r := atBroker(t, "--describe", "--mirror", m2, "--json")
				var resp protocol.DescribeClusterMirrorsResponse
				if err := json.Unmarshal([]byte(r.Stdout), &resp); err != nil {
					r.Stdout = fmt.Sprintf("(unparsable: %v)\n%s", err, r.Stdout)
					return r
				}
				var rows [][]string
				for _, m := range resp.Mirrors {
					for _, tp := range m.Topics {
						for _, p := range tp.Partitions {
							rows = append(rows, []string{m.MirrorName, tp.TopicName, strconv.Itoa(int(p.PartitionIndex)),
								strconv.FormatInt(p.SourceOffset, 10), strconv.FormatInt(p.DestinationOffset, 10), strconv.FormatInt(p.Lag, 10), p.State})
						}
					}
				}
				r.Stdout = kipTable(kipDescribeHeader, rows)
				return r
			}},

		{name: "8.3 kafka-configs --alter of a mirror",
			args: []string{"--entity-type", "cluster-mirrors", "--entity-name", m1, "--alter", "--add-config", "bootstrap.servers=" + altered},
			want: text("Completed updating config for mirror " + m1 + ".\n"),
			after: func(t *testing.T) {
				m1Bootstrap = altered
				// The mirror reconnects and mirrors on.
				produceVariety(t, env.Source, eu, 200, 91)
				waitCaughtUp(t, m1, eu, 2*time.Minute)
			}},
		{name: "8.2 list, after the alter", args: []string{"--list"}, want: listWant, poll: true, own: true},

		{name: "8.3 kafka-configs source-side quota on the fetcher's client ID",
			before: func(t *testing.T) {
				owner := int32(-1)
				for _, tp := range describe(t, m1).Topics {
					if tp.TopicName == us {
						owner = tp.Partitions[0].OwnerBrokerId
					}
				}
				if owner < 0 {
					t.Fatalf("describe names no owner of %s-0", us)
				}
				fetcherClientID = fmt.Sprintf("broker-%d-fetcher-0-mirror-%s", owner, m1)
			},
			run: func(t *testing.T) cliResult {
				return kafkaConfigsTool(t, env.Source.Nodes()[0].BrokerAddr, "--alter", "--add-config", "consumer_byte_rate=1024",
					"--entity-type", "clients", "--entity-name", fetcherClientID)
			},
			want: func(*testing.T) string { return "Completed updating config for client " + fetcherClientID + ".\n" },
			after: func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				const throttle = "sidemirror_source_throttle_seconds_total"
				before, err := env.Sidecars.SumMetric(ctx, throttle, m1)
				if err != nil {
					t.Fatal(err)
				}
				quota := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &fetcherClientID}},
					Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}}
				removed := false
				remove := func() {
					rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer rcancel()
					if _, err := kadm.NewClient(newClient(t, env.Source, testbed.Admin)).AlterClientQuotas(rctx, []kadm.AlterClientQuotaEntry{quota}); err != nil {
						t.Errorf("remove the quota of %s: %v", fetcherClientID, err)
					}
					removed = true
				}
				defer func() {
					if !removed {
						remove()
					}
				}()
				produceBytes(t, us, 0, 64, 1024)
				wait.For(t, time.Minute, "the source to throttle the fetcher of "+fetcherClientID, func() bool {
					v, err := env.Sidecars.SumMetric(ctx, throttle, m1)
					return err == nil && v > before
				})
				remove()
				waitCaughtUp(t, m1, us, 2*time.Minute)
			}},

		// Section 8.3's destination-side throttle, run as the KIP writes it
		// on the broker that leads k8-my-topic-0 (the KIP's broker 4).
		{name: "8.3 kafka-configs destination-side rate on a broker",
			before: func(t *testing.T) {
				for _, tp := range describe(t, m2).Topics {
					for _, p := range tp.Partitions {
						if tp.TopicName == myTopc && p.PartitionIndex == 0 {
							throttledBroker = strconv.Itoa(int(p.OwnerBrokerId))
						}
					}
				}
				if throttledBroker == "" {
					t.Fatalf("describe names no owner of %s-0", myTopc)
				}
				top.Cleanup(func() { // in case a later step fails: the package's other tests run unthrottled
					atBroker(top, "--entity-type", "brokers", "--entity-name", throttledBroker, "--alter", "--delete-config", "mirror.replication.throttled.rate")
					atBroker(top, "--entity-type", "topics", "--entity-name", myTopc, "--alter", "--delete-config", "mirror.replication.throttled.replicas")
				})
			},
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--alter", "--add-config", "mirror.replication.throttled.rate=100000000")
			},
			want: func(*testing.T) string { return "Completed updating config for broker " + throttledBroker + ".\n" }},
		{name: "8.3 kafka-configs throttled replicas of a topic",
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "topics", "--entity-name", myTopc, "--alter", "--add-config", "mirror.replication.throttled.replicas=[0:"+throttledBroker+"]")
			},
			want: text("Completed updating config for topic " + myTopc + ".\n")},
		{name: "kafka-configs --describe of the broker",
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--describe")
			},
			want: func(*testing.T) string {
				return "Dynamic configs for broker " + throttledBroker + " are:\n" +
					"  mirror.replication.throttled.rate=100000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:mirror.replication.throttled.rate=100000000}\n"
			}},
		{name: "kafka-configs --describe of the topic",
			args: []string{"--entity-type", "topics", "--entity-name", myTopc, "--describe"},
			want: func(*testing.T) string {
				return "Dynamic configs for topic " + myTopc + " are:\n" +
					"  mirror.replication.throttled.replicas=0:" + throttledBroker + " sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:mirror.replication.throttled.replicas=0:" + throttledBroker + "}\n"
			}},
		// The rate takes effect without a restart: 1 MB/s measured from
		// the sidecar's appended bytes while a backlog of the throttled
		// replica drains; then, with the replicas listing another
		// partition, the same partition is not throttled.
		{name: "the throttle takes effect at 1 MB/s",
			before: func(t *testing.T) {
				// Hold the partition back (1 byte/s) while its backlog is
				// written, so the source is ahead during the whole window.
				setRate := atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--alter", "--add-config", "mirror.replication.throttled.rate=1")
				if setRate.Code != 0 {
					t.Fatalf("set the rate to 1: exit %d, %s", setRate.Code, setRate.Stderr)
				}
				id, _ := strconv.Atoi(throttledBroker)
				wait.For(t, 30*time.Second, "sidecar "+throttledBroker+" to apply the rate 1", func() bool {
					return sidecarGauge(t, int32(id), "sidemirror_replication_throttled_rate_bytes") == 1
				})
				produceBacklog(t, myTopc, []int32{0}, 7000) // about 7 MB: 7 s at 1 MB/s
				throttleBase = mirroredBytesBySidecar(t, m2)
			},
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--alter", "--add-config", "mirror.replication.throttled.rate=1000000")
			},
			want: func(*testing.T) string { return "Completed updating config for broker " + throttledBroker + ".\n" },
			after: func(t *testing.T) {
				const rate = 1_000_000
				id, _ := strconv.Atoi(throttledBroker)
				rates := sidecarRates(t, m2, throttleBase)
				got, ok := rates[int32(id)]
				if !ok {
					t.Fatalf("sidecar %s did not mirror during the window (rates %v)", throttledBroker, rates)
				}
				if got < 0.9*rate || got > 1.1*rate {
					t.Fatalf("sidecar %s appended %.0f bytes/s, want %d +-10%%", throttledBroker, got, rate)
				}
				waitCaughtUp(t, m2, myTopc, 2*time.Minute)

				// The replicas no longer list partition 0 on this broker:
				// it is not throttled any more, at the same rate. 4 MB at
				// 1 MB/s would take at least 3.9 s.
				r := atBroker(t, "--entity-type", "topics", "--entity-name", myTopc, "--alter", "--add-config", "mirror.replication.throttled.replicas=[1:"+throttledBroker+"]")
				if r.Code != 0 {
					t.Fatalf("set the replicas to 1:%s: exit %d, %s", throttledBroker, r.Code, r.Stderr)
				}
				wait.For(t, 30*time.Second, "the replicas 1:"+throttledBroker+" in the raft state", func() bool {
					return strings.Contains(atBroker(t, "--entity-type", "topics", "--entity-name", myTopc, "--describe").Stdout, "=1:"+throttledBroker+" ")
				})
				start := time.Now()
				produceBacklog(t, myTopc, []int32{0}, 4000)
				src := endOffsets(t, env.Source, myTopc)
				wait.For(t, time.Minute, myTopc+"-0 to catch up", func() bool {
					return endOffsets(t, env.Destination, myTopc)[0] == src[0]
				})
				took := time.Since(start)
				t.Logf("4 MB to %s-0, not a throttled replica, mirrored %s after the produce began", myTopc, took.Round(time.Millisecond))
				if took > 3*time.Second {
					t.Fatalf("%s-0 took %s to mirror 4 MB once its replica was no longer throttled: it is still throttled at 1 MB/s", myTopc, took)
				}
				waitCaughtUp(t, m2, myTopc, 2*time.Minute)
			}},
		{name: "kafka-configs --delete-config of the rate",
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--alter", "--delete-config", "mirror.replication.throttled.rate")
			},
			want: func(*testing.T) string { return "Completed updating config for broker " + throttledBroker + ".\n" }},
		{name: "kafka-configs --delete-config of the replicas",
			args: []string{"--entity-type", "topics", "--entity-name", myTopc, "--alter", "--delete-config", "mirror.replication.throttled.replicas"},
			want: text("Completed updating config for topic " + myTopc + ".\n")},
		{name: "kafka-configs --describe of the broker, deleted",
			run: func(t *testing.T) cliResult {
				return atBroker(t, "--entity-type", "brokers", "--entity-name", throttledBroker, "--describe")
			},
			want: func(*testing.T) string { return "Dynamic configs for broker " + throttledBroker + " are:\n" }},

		{name: "describe --failed",
			before: func(t *testing.T) {
				oldMaxMessageBytes = maxMessageBytes(t)
				// A record the destination refuses: the append fails for good.
				setMaxMessageBytes(t, "1000")
				produceBytes(t, myTopc, 0, 1, 4000)
				wait.For(t, time.Minute, myTopc+"-0 to go FAILED", func() bool {
					for _, tp := range describe(t, m2).Topics {
						for _, p := range tp.Partitions {
							if p.PartitionIndex == 0 && p.State == "FAILED" {
								failedRow = p
								return true
							}
						}
					}
					return false
				})
				stateOf[myTopc] = "FAILED"
				if reason := deref(failedRow.LastError); !strings.Contains(reason, "MESSAGE_TOO_LARGE") {
					t.Fatalf("%s-0 FAILED with %q, want the destination's MESSAGE_TOO_LARGE", myTopc, reason)
				}
			},
			args: []string{"--describe", "--failed", "--mirror", m2}, code: 3, poll: true,
			want: func(t *testing.T) string {
				src, dst := endOffsets(t, env.Source, myTopc), endOffsets(t, env.Destination, myTopc)
				return kipTable(failedHeader, [][]string{{m2, myTopc, "0", strconv.FormatInt(src[0], 10), strconv.FormatInt(dst[0], 10),
					strconv.FormatInt(src[0]-dst[0], 10), "FAILED", "0/0", strings.Join(strings.Fields(deref(failedRow.LastError)), " ")}})
			}},
		{name: "recover",
			before: func(t *testing.T) {
				setMaxMessageBytes(t, oldMaxMessageBytes)
				// Every broker, the partition's leader among them, must have
				// applied it before the retry appends again.
				wait.For(t, 30*time.Second, "every destination broker to show max.message.bytes="+oldMaxMessageBytes+" again", func() bool {
					return everyBrokerShows(t, destCl, myTopc, "max.message.bytes", oldMaxMessageBytes)
				})
			},
			args: []string{"--recover", "--topics", myTopc, "--mirror", m2},
			want: text("Recovered 1 mirror topic(s) in mirror " + m2 + ": [" + myTopc + "]\n"),
			after: func(t *testing.T) {
				stateOf[myTopc] = "MIRRORING"
				// A broker answers DescribeConfigs from its metadata a
				// moment before its partition's log takes the config, so the
				// first retry may meet the old limit once more: recover
				// again until the partition stays out of FAILED.
				wait.For(t, 2*time.Minute, myTopc+" to leave FAILED after --recover", func() bool {
					states, _ := partitionStates(t, m2, myTopc)
					for _, st := range states {
						if st == "FAILED" {
							t.Logf("%s FAILED again after --recover; recovering again", myTopc)
							atBroker(t, "--recover", "--topics", myTopc, "--mirror", m2)
							return false
						}
					}
					return allIn(states, "MIRRORING")
				})
				waitCaughtUp(t, m2, myTopc, 2*time.Minute)
			}},
		{name: "describe --failed, none", args: []string{"--describe", "--failed", "--mirror", m2}, want: text(failedHeader + "\n"), poll: true},

		{name: "8.2 pause", args: []string{"--pause", "--topics", myTopc, "--mirror", m2},
			want:  text("Paused mirroring for 1 topic(s) in mirror " + m2 + ": [" + myTopc + "]\n"),
			after: func(*testing.T) { stateOf[myTopc] = "PAUSED" }},
		{name: "8.2 stop", args: []string{"--stop", "--topics", us, "--mirror", m1},
			want:  text("Stopped mirroring for 1 topic(s) in mirror " + m1 + ": [" + us + "]\n"),
			after: func(*testing.T) { stateOf[us] = "STOPPED" }},
		// The KIP's describe example: MIRRORING and STOPPED in one mirror,
		// PAUSED in the other.
		{name: "8.2 describe, stopped and paused", args: []string{"--describe"}, want: describeWant(m1, m2), poll: true, own: true},
		{name: "8.2 resume", args: []string{"--resume", "--topics", myTopc, "--mirror", m2},
			want: text("Resumed mirroring for 1 topic(s) in mirror " + m2 + ": [" + myTopc + "]\n"),
			after: func(t *testing.T) {
				stateOf[myTopc] = "MIRRORING"
				produceVariety(t, env.Source, myTopc, 100, 92)
				waitCaughtUp(t, m2, myTopc, 2*time.Minute)
			}},

		{name: "8.4 kafka-acls --add, full admin on one mirror",
			args: []string{"--add", "--cluster-mirror", m1, "--operation", "Create", "--operation", "Alter", "--operation", "Describe", "--operation", "Delete",
				"--operation", "AlterConfigs", "--operation", "DescribeConfigs", "--allow-principal", "User:mirror-admin"},
			want: text("Adding ACLs for resource " + pattern(m1) + ":\n" + aclLines("User:mirror-admin", adminOps...) + "\n")},
		{name: "8.4 kafka-acls --add, read-only monitoring on all mirrors",
			args: []string{"--add", "--cluster-mirror", "*", "--operation", "Describe", "--operation", "DescribeConfigs", "--allow-principal", "User:monitor"},
			want: text("Adding ACLs for resource " + pattern("*") + ":\n" + aclLines("User:monitor", "DESCRIBE", "DESCRIBE_CONFIGS") + "\n")},
		{name: "8.4 kafka-acls --list for a mirror", args: []string{"--list", "--cluster-mirror", m1}, poll: true,
			want: text("Current ACLs for resource " + pattern(m1) + ":\n" + aclLines("User:mirror-admin", adminOps...) + "\n")},
		{name: "kafka-acls --remove", args: []string{"--remove", "--cluster-mirror", "*", "--allow-principal", "User:monitor", "--operation", "Describe", "--operation", "DescribeConfigs"},
			want: text("Removing ACLs for resource " + pattern("*") + ":\n" + aclLines("User:monitor", "DESCRIBE", "DESCRIBE_CONFIGS") + "\n")},
		{name: "kafka-acls --remove, every ACL of a mirror", args: []string{"--remove", "--cluster-mirror", m1, "--allow-principal", "User:mirror-admin"},
			want: text("Removing ACLs for resource " + pattern(m1) + ":\n" + aclLines("User:mirror-admin", adminOps...) + "\n")},

		{name: "8.2 stop, the rest", args: []string{"--stop", "--topics", eu, "--mirror", m1},
			want: text("Stopped mirroring for 1 topic(s) in mirror " + m1 + ": [" + eu + "]\n")},
		{name: "8.2 stop, the other mirror", args: []string{"--stop", "--topics", myTopc, "--mirror", m2},
			want: text("Stopped mirroring for 1 topic(s) in mirror " + m2 + ": [" + myTopc + "]\n")},
		// Delete waits for the stopped partitions to be released.
		{name: "8.2 delete", args: []string{"--delete", "--mirror", m1}, want: text("Deleted mirror " + m1 + "\n"), poll: true},
		{name: "8.2 delete, the other", args: []string{"--delete", "--mirror", m2}, want: text("Deleted mirror " + m2 + "\n"), poll: true},
	}

	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			runStep := func() (bool, string) {
				var r cliResult
				if s.run != nil {
					r = s.run(t)
				} else {
					r = atBroker(t, s.args...)
				}
				out, code := r.Stdout, r.Code
				if s.own {
					var othersFailed bool
					out, othersFailed = ownLines(out, m1, m2)
					if othersFailed && code == 3 {
						code = 0 // another test's FAILED partitions
					}
				}
				want := s.want(t)
				msg := fmt.Sprintf("%v: exit %d (want %d)\nstdout:\n%s\nstderr: %q\nwant stdout:\n%s", s.args, r.Code, s.code, out, r.Stderr, want)
				return code == s.code && r.Stderr == "" && out == want, msg
			}
			ok, msg := runStep()
			// A polled step fails with its last output beside the
			// expected one, so a timeout shows what differed.
			for deadline := time.Now().Add(time.Minute); !ok && s.poll && time.Now().Before(deadline); {
				time.Sleep(200 * time.Millisecond)
				ok, msg = runStep()
			}
			if !ok {
				t.Fatal(msg)
			}
			t.Logf("%s", msg[:strings.Index(msg, "\nwant stdout:")])
			if s.after != nil {
				s.after(t)
			}
		})
		if !ok {
			break // the later steps build on this one
		}
	}
}

// everyBrokerShows reports whether every destination broker's own
// DescribeConfigs answer (each broker answers from its metadata) gives
// topic's key the value v.
func everyBrokerShows(t *testing.T, cl *kgo.Client, topic, key, v string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range env.Destination.Nodes() {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl.Broker(int(n.ID)))
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 ||
			resp.Resources[0].Configs[0].Value == nil || *resp.Resources[0].Configs[0].Value != v {
			return false
		}
	}
	return true
}

// ownLines keeps the header of a --list or --describe table and the rows of
// mirrors (with the error lines under them), and reports whether a dropped
// row is FAILED.
func ownLines(out string, mirrors ...string) (string, bool) {
	var b strings.Builder
	keep, othersFailed := false, false
	for i, line := range strings.SplitAfter(out, "\n") {
		switch {
		case line == "":
			continue
		case i == 0:
			keep = true
		case strings.HasPrefix(line, "  "): // an error line belongs to the row above
		default:
			f := strings.Fields(line)
			keep = len(f) > 0 && slices.Contains(mirrors, f[0])
			othersFailed = othersFailed || !keep && slices.Contains(f, "FAILED")
		}
		if keep {
			b.WriteString(line)
		}
	}
	return b.String(), othersFailed
}

// produceBytes writes n uncompressed records of size random bytes to
// partition p of topic on the source.
func produceBytes(t *testing.T, topic string, p int32, n, size int) {
	t.Helper()
	cl := newClient(t, env.Source, testbed.Admin, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range n {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
}

// kafkaConfigsTool runs Kafka's kafka-configs.sh (kafka.admin.ConfigCommand)
// against bootstrap, a PLAINTEXT cluster (the source).
func kafkaConfigsTool(t *testing.T, bootstrap string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", env.Dist.Classpath(), "kafka.admin.ConfigCommand",
		"--bootstrap-server", bootstrap}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	// Its stderr holds the JVM's and log4j's warnings: logged, not compared.
	r := cliResult{Stdout: out.String()}
	if errb.Len() > 0 {
		t.Logf("kafka-configs %v stderr:\n%s", args, errb.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kafka-configs %v: %v", args, err)
	}
	return r
}
