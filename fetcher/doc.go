// Package fetcher is the data plane of sidemirror. It fetches raw record
// batches from source brokers, inspects them, rewrites only their producer
// header fields (the sidecar's idempotent producer ID, epoch and sequence,
// with the CRC32C recomputed) and appends them to the local destination
// broker at the same offsets they have on the source, without decompressing
// or recompressing the records.
package fetcher
