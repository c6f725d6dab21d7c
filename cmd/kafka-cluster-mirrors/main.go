// Command kafka-cluster-mirrors is the operator CLI for cluster mirrors. It
// talks to any sidecar's admin endpoint with the Kafka protocol and prints
// the outputs described by KIP-1279:
//
//	kafka-cluster-mirrors --bootstrap-server :9191 --create --mirror my-mirror --mirror-config mirror.properties
//	kafka-cluster-mirrors --bootstrap-server :9191 --start --topics 'orders-.*' --exclude orders-internal --mirror my-mirror
//	kafka-cluster-mirrors --bootstrap-server :9191 --describe [--mirror my-mirror] [--json]
//	kafka-cluster-mirrors --bootstrap-server :9191 --alter --mirror my-mirror --add-config 'bootstrap.servers=src:9092'
//	kafka-cluster-mirrors --bootstrap-server :9191 --list-sidecars
//	kafka-cluster-mirrors --bootstrap-server :9191 --command-config admin.properties --add-acl --cluster-mirror my-mirror --operation Alter --allow-principal User:mirror-admin
//
// main stays thin (main.go): cli.go parses the flags into a Config and
// validates it, commands.go runs one action against a client and prints its
// outcome, wait.go --start/--resume --wait and --describe --watch, admin.go
// --alter and the actions on the sidecars' raft group, configs.go the
// throttle configs of --entity-type brokers and topics, acls.go the ACL
// actions (kafka-acls.sh --cluster-mirror), security.go the client security
// of --command-config. Exit codes (docs/operations.md): 0 on success, 1 on
// any other error (usage, connection, Kafka error codes), 2 for settings
// refused at validation (unsupported or invalid security settings of
// --command-config, or a mirror config's settings that the sidecar refuses
// with INVALID_CONFIG before it connects to the source), 3 when --describe shows FAILED partitions or --wait
// meets one, 4 when --wait times out.
//
// bootstrap.go resolves a --bootstrap-server that is a broker of the
// destination cluster (as in the KIP's examples) to a sidecar, through the
// sidecar registry in __mirror_state.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
