// Package protocol implements the Kafka wire protocol spoken by the sidecar's
// admin endpoint: request and response types for the cluster mirroring APIs
// (one file per message, with its schema in a header comment), their
// encoding with flexible versions and tagged fields, a framing server that
// dispatches requests to a handler, and a client used by the
// kafka-cluster-mirrors CLI and by sidecars talking to each other.
//
// # Messages
//
// Every API has a request and a response type implementing Request and
// Response: Key, Version/SetVersion, AppendTo (encode the body) and ReadFrom
// (decode it; unknown tagged fields are skipped, trailing bytes are an
// error). The registry in apis.go lists each API's key, name and versions
// (APIs, LookupAPI, NewRequest). Besides Kafka's ApiVersions (18),
// DescribeConfigs (32, versions 0-4) and IncrementalAlterConfigs (44,
// versions 0-1), served for the CLUSTER_MIRROR (64) config resource, the
// APIs are KIP-1279's, under private keys from 1000 (KeyCreateClusterMirror
// ... KeyWriteMirrorStates), plus sidemirror's own: ApplyCommand (forward a
// raft command to the leader), DescribeLocalPartitions (one sidecar's
// describe rows), and AddSidecar, RemoveSidecar and DescribeSidecars (the
// raft group's membership). All private APIs are version 0 and flexible;
// Kafka's own APIs keep their non-flexible early versions
// (codec_versions.go).
// Field names follow the KIP's schemas (ThrottleTimeMs, TopicId,
// SourceClusterId); sidemirror's additions are tagged fields, documented in
// each message's file.
//
// # Server and client
//
// NewServer(handler).Serve(listener) reads size-prefixed frames, decodes
// request header v1/v2 and the body, answers ApiVersions itself (with
// KIP-511's v0 fallback for newer clients) and calls Handler.Handle for
// everything else, one request at a time per connection. A connection that
// breaks the protocol is logged with one warning and closed; the others keep
// working. Close stops the listeners and waits for every goroutine.
//
// Bounds (limits.go): MaxConnections per listener, MaxQueuedBytes of requests
// held over all connections, ReadTimeout of idle connections, and
// MaxRequestElements array elements per decoded request. Security (tls.go):
// ConnInfo carries the TLS state and, on the sidecars' peer listener, the
// authenticated peer; PeerAPIsOnly refuses the internal APIs to anyone else.
// Authentication (sasl.go): the SASL option requires a SASL exchange of
// every client but a peer; ConnInfo.Principal is the SASL user, the
// certificate's mapped subject (TLSPrincipal), PeerPrincipal for a peer, or
// User:ANONYMOUS.
//
// Dial returns a Client whose Do sends one request and returns the decoded
// response. Kafka error codes stay in the response; ErrorFor turns one into
// an *Error that unwraps to franz-go's kerr error.
//
// Files: doc.go (this overview), apis.go (keys, registry, interfaces),
// header.go (request and response headers), codec.go and codec_versions.go
// (shared encoding helpers), errors.go (Error, ErrorFor), server.go (the
// framing server), limits.go (connection, queued-bytes and idle bounds),
// tls.go (TLS state and peer identity in ConnInfo, PeerAPIsOnly, DialFunc,
// TLSListener), sasl.go (the server's SASL exchange and the one principal
// derivation: SASL, TLSPrincipal, PeerPrincipal, ConnInfo.Principal),
// sasl_relay.go (NewSASLRelay: exchanges relayed to a Kafka broker that
// checks the credentials), client.go (Dial, Client),
// client_sasl.go (the client's SASL exchange, SASLMechanism),
// kafka_apis.go (Kafka's SaslHandshake, SaslAuthenticate, DescribeAcls,
// CreateAcls and DeleteAcls as franz-go's kmsg types), and one file per
// message:
//
//	add_sidecar.go
//	api_versions.go
//	apply_command.go
//	create_cluster_mirror.go
//	delete_cluster_mirror.go
//	describe_cluster_mirrors.go
//	describe_configs.go
//	describe_local_partitions.go
//	describe_sidecars.go
//	incremental_alter_configs.go
//	list_cluster_mirrors.go
//	pause_mirror_topics.go
//	read_mirror_states.go
//	recover_mirror_topics.go
//	remove_sidecar.go
//	resume_mirror_topics.go
//	start_mirror_topics.go
//	stop_mirror_topics.go
//	write_mirror_states.go
package protocol
