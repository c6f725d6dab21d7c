// Package e2e holds sidemirror's end-to-end tests. They run against real
// Apache Kafka clusters started once per test package by the test bed in
// e2e/testbed, and check results with independent clients (kcat, Kafka's
// console tools) as well as franz-go.
package e2e
