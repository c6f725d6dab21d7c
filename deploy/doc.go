// Package deploy holds what an operator needs to run sidemirror: the
// systemd unit and its environment file in deploy/systemd, commented example
// configurations in deploy/examples, and Kubernetes examples in
// deploy/kubernetes (statefulset: brokers with sidemirror as a native
// sidecar; strimzi: sidecar pods beside a Strimzi cluster). The packages
// (tools/release) install the unit and the example config; tools/deploycheck
// tests the manifests. It contains no Go code besides this comment; see
// docs/installation.md.
package deploy
