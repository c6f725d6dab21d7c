// Package security holds Kafka's security settings as sidemirror speaks
// them, shared by the daemon (its destination client, mirrors' source
// clients and its admin endpoint) and the kafka-cluster-mirrors CLI:
//
//   - ClientConfig: a Kafka client's security.protocol, sasl.* and ssl.*
//     properties, validated with the offending key named, and turned into
//     franz-go options (KgoOpts): SASL PLAIN, SCRAM-SHA-256/512 and
//     OAUTHBEARER with Kafka's client credentials flow, TLS with PEM, PKCS12
//     and JKS stores and encrypted PKCS#8 keys.
//   - ListenerTLS and ServerTLS: a listener's ssl.* settings (key store,
//     trust store, ssl.client.auth) as a live tls.Config that re-reads
//     rotated store files, and the principal of a TLS client.
//   - DistinguishedName and PrincipalMapper: principals formed as Kafka's
//     DefaultKafkaPrincipalBuilder forms them, with
//     ssl.principal.mapping.rules.
//
// Errors name keys and never carry a secret value.
//
// Files: client.go (ClientConfig), stores.go (key and trust stores),
// pkcs8.go (encrypted PKCS#8 keys), jaas.go (sasl.jaas.config), oauth.go
// (token retrieval for OAUTHBEARER), listener.go (ListenerTLS, ServerTLS), peer.go
// (ServerTLS.DialConfig, for peers that share a listener's settings),
// principal.go (distinguished names, mapping rules), errors.go.
package security
