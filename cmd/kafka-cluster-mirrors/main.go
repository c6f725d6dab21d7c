// Command kafka-cluster-mirrors is the operator CLI for cluster mirrors. It
// talks to any sidecar's admin endpoint with the Kafka protocol and prints
// the outputs described by KIP-1279.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "kafka-cluster-mirrors: no mirror operations are available in this build")
	os.Exit(1)
}
