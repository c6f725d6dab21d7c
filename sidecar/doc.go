// Package sidecar is the sidemirror daemon: it loads and validates the
// configuration (Config, read from a Java-style properties file by
// LoadConfig; ClientConfig for the Kafka client properties of a cluster),
// builds the logger (NewLogger) and runs one Sidecar next to one broker of
// the destination cluster: it locks the data directory, serves /metrics and
// /healthz, wires the components, and shuts them down in a fixed order.
//
// Files: properties.go (the .properties parser), config.go and
// clientconfig.go (keys, defaults, validation), jaas.go (sasl.jaas.config),
// resolve.go (${env:...} and ${file:...} references), validate.go (shared
// checks and messages), sidecar.go (lifecycle and shutdown order),
// routines.go (tracked goroutines), lock.go (the data.dir lock),
// metrics.go, logging.go, version.go, errors.go.
package sidecar
