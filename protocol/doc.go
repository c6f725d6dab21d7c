// Package protocol implements the Kafka wire protocol spoken by the sidecar's
// admin endpoint: request and response types for the cluster mirroring APIs
// (one file per message, with its schema in a header comment), their
// encoding with flexible versions and tagged fields, a framing server that
// dispatches requests to a handler, and a client used by the
// kafka-cluster-mirrors CLI and by sidecars talking to each other.
package protocol
