package statestore

import "errors"

// ErrInvalidOption reports an option that New refuses: a partition count or
// replication factor out of range, or a base client that cannot be cloned
// into the store's producer.
var ErrInvalidOption = errors.New("statestore: invalid option")

// ErrTopicNotFound reports that __mirror_state does not exist on the
// destination cluster (EnsureTopic creates it).
var ErrTopicNotFound = errors.New("statestore: topic " + TopicName + " does not exist")

// ErrPartitionCount reports an existing __mirror_state whose partition count
// differs from the configured one. The store never changes it: that would
// move mirrors to other coordinator partitions.
var ErrPartitionCount = errors.New("statestore: " + TopicName + " partition count mismatch")

// ErrNoSuchPartition reports a partition number outside the topic.
var ErrNoSuchPartition = errors.New("statestore: no such partition")

// ErrMalformed reports a key or value that does not decode. Load stops on a
// malformed record of a known type rather than guess at the state.
var ErrMalformed = errors.New("statestore: malformed record")

// ErrUnknownKeyVersion reports a key written with a key version this build
// does not know; Load skips such records (a newer writer's).
var ErrUnknownKeyVersion = errors.New("statestore: unknown key version")

// ErrInvalidRecord reports a record that Write refuses to send.
var ErrInvalidRecord = errors.New("statestore: invalid record")

// ErrClosed reports a call on a closed Store.
var ErrClosed = errors.New("statestore: store closed")
