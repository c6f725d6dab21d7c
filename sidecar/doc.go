// Package sidecar is the sidemirror daemon: it loads and validates the
// configuration (Config, read from a Java-style properties file by
// LoadConfig; the Kafka client properties of a cluster are a
// security.ClientConfig), builds the logger (NewLogger) and runs one Sidecar
// next to one broker of the destination cluster: it locks the data
// directory, serves /metrics and /healthz, wires the components, and shuts
// them down in a fixed order.
//
// Files: config.go (keys, defaults, validation; ${env:...} and ${file:...}
// references are resolved with properties.Resolver), validate.go (shared
// checks and messages), components.go (wiring; SourceKgoOpts, which
// resolves a mirror's source settings on every connect), sourceprops.go
// (the Kafka consumer properties of a mirror config that set source client
// options), sidecar.go
// (lifecycle and shutdown order), routines.go (tracked goroutines), lock.go
// (the data.dir lock), statedump.go, metrics.go, logging.go, version.go,
// errors.go.
package sidecar
