// Package sidecar is the sidemirror daemon: it loads and validates the
// configuration (Config, read from a Java-style properties file by
// LoadConfig; the Kafka client properties of a cluster are a
// security.ClientConfig), builds the logger (NewLogger) and runs one Sidecar
// next to one broker of the destination cluster: it locks the data
// directory, serves the status page (/), /metrics, /healthz and /readyz,
// wires the components, and shuts them down in a fixed order.
//
// Files: config.go (keys, defaults, validation; ${env:...} and ${file:...}
// references are resolved with properties.Resolver), validate.go (shared
// checks and messages), cpu.go (sidecar.cpu.cores: the cores that run Go
// code, applied by the daemon's main), memory.go (the Go runtime's soft
// memory limit derived from mirror.buffer.memory.bytes), peer.go (peer.* and the listeners' bounds; the
// peer stream layer of peer.security.protocol=SSL), adminsec.go (the admin
// endpoint's admin.security.protocol, admin.sasl.*, admin.ssl.* and
// admin.super.users, its server options), components.go (wiring; SourceKgoOpts, which
// resolves a mirror's source settings on every connect), sourceprops.go (the
// Kafka consumer properties of a mirror config that set source client
// options), sidecar.go
// (lifecycle and shutdown order), selfcheck.go (the check at start that the
// advertised admin address reaches this sidecar), readyz.go (the /readyz checks),
// destcheck.go (the start-up check that the destination.* settings get through
// to the local broker),
// notify.go (systemd's Type=notify: READY=1 once a raft member that
// reaches its broker, STOPPING=1), status.go (the status page at "/" and
// its lag sampler), routines.go (tracked goroutines), registry.go (this sidecar's record
// in the sidecar registry of __mirror_state), lock.go (the
// data.dir lock), statedump.go, metrics.go, logging.go, version.go,
// errors.go.
package sidecar
