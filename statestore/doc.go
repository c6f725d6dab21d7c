// Package statestore owns the __mirror_state topic on the destination
// cluster: the schemas of its keys and versioned values, their encoding,
// loading a coordinator partition into memory, writing and tombstoning
// records, and mapping a mirror to its coordinator partition.
package statestore
