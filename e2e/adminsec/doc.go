// Package adminsec holds the end-to-end tests of the admin endpoint's
// security on real Kafka: sidecars whose admin endpoint is SASL_PLAINTEXT,
// relaying SASL to a destination broker whose SCRAM users are created with
// Kafka's own ConfigCommand (kafka-configs.sh), and KIP-1279's
// CLUSTER_MIRROR ACLs managed and enforced through kafka-cluster-mirrors.
package adminsec
