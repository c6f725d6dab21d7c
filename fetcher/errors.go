package fetcher

import "errors"

// Sentinel errors of the fetcher. A partition's FAILED reason (LastError) is
// the text of an error that wraps one of these, with the offending offset and
// what to do; compare with errors.Is.
var (
	// ErrClosed is returned by a Manager that is closed or closing.
	ErrClosed = errors.New("fetcher: manager closed")

	// ErrInvalidOption is wrapped by NewManager for every bad option.
	ErrInvalidOption = errors.New("fetcher: invalid option")

	// ErrUnknownMirror is returned by Start for a partition whose mirror has
	// no source client: call SetMirror first.
	ErrUnknownMirror = errors.New("fetcher: unknown mirror")

	// ErrStopping is returned by Start while a Stop of the same partition
	// has not finished; call Start again once Stop returned.
	ErrStopping = errors.New("fetcher: partition is stopping")

	// ErrCorruptBatch means a source batch failed its CRC32C check (or its
	// framing is broken). Nothing of it is written.
	ErrCorruptBatch = errors.New("fetcher: corrupt source batch")

	// ErrMessageFormat means a source batch uses an old message format
	// (magic v0 or v1 message sets), which is not mirrored yet.
	ErrMessageFormat = errors.New("fetcher: unsupported message format")

	// ErrTransactionAborted means the destination ended a replayed
	// transaction on its own (its transaction coordinator aborted it after
	// transaction.max.timeout.ms, or another producer fenced it): the
	// transaction's marker can no longer land at the source offset.
	ErrTransactionAborted = errors.New("fetcher: the destination aborted or fenced a replayed transaction")

	// ErrBatchStraddle means a source batch starts before and ends after the
	// destination log end offset, so it cannot be appended whole at its
	// source offsets.
	ErrBatchStraddle = errors.New("fetcher: source batch straddles the destination log end offset")

	// ErrDivergence means the destination log is longer than the source log
	// (for example after an unclean leader election on the source): stock
	// Kafka cannot truncate the destination, so the operator must re-seed.
	ErrDivergence = errors.New("fetcher: destination is ahead of the source")

	// ErrExactness means the destination appended a batch at an offset other
	// than the source offset. It must never happen: it means another writer
	// appended to the partition.
	ErrExactness = errors.New("fetcher: exactness invariant violated")

	// ErrOffsetMapFull means a translate-mode partition needs more offset
	// shifts than its __mirror_state record holds (MaxOffsetShifts).
	ErrOffsetMapFull = errors.New("fetcher: the offset map of a translate-mode partition is full")

	// ErrNotSuperUser means the destination refused an append with
	// TOPIC_AUTHORIZATION_FAILED: mirror topics deny writes to everybody but
	// the sidecar principal, which must be a super user (DESIGN.md D4).
	ErrNotSuperUser = errors.New("fetcher: the destination refused the sidecar's write (TOPIC_AUTHORIZATION_FAILED): the sidecar principal must be listed in the destination brokers' super.users")

	// ErrAppendRejected means the destination rejected a batch with a
	// non-retriable error (MESSAGE_TOO_LARGE, INVALID_RECORD, ...).
	ErrAppendRejected = errors.New("fetcher: the destination rejected a batch")

	// ErrSourceClusterChanged means the source answers with another
	// cluster ID than the mirror's (the cluster was replaced or rebuilt at
	// the same address): nothing of it may be appended.
	ErrSourceClusterChanged = errors.New("fetcher: the source cluster ID changed")

	// ErrSourceTopicRecreated means a source topic has another topic ID
	// than when it was started: its records are not the mirrored ones.
	ErrSourceTopicRecreated = errors.New("fetcher: the source topic was recreated")

	// ErrSourceRejected means the source answered a fetch or a metadata
	// request with a non-retriable error.
	ErrSourceRejected = errors.New("fetcher: the source rejected a request")
)

// Internal signals between the parts of the fetcher; never returned to
// callers.
var (
	errNotLeader      = errors.New("fetcher: the local broker is not the leader of the partition")
	errLocalUnknown   = errors.New("fetcher: the local broker does not know the partition (yet)")
	errRealign        = errors.New("fetcher: source log start moved past the next offset: realigning")
	errRepeatRecorded = errors.New("fetcher: markers the destination wrote twice were recorded: resuming")
	errCancelled      = errors.New("fetcher: append cancelled before it was sent")
	errMirrorClosed   = errors.New("fetcher: mirror source client closed or replaced")
	errNoLeader       = errors.New("fetcher: source partition has no leader")
	errNoLiveRecord   = errors.New("fetcher: no live record to copy into fillers yet")
	errMissingAnswer  = errors.New("fetcher: broker response is missing the partition")
)

// fatal are the errors that fail a partition: its driver does not retry
// them. Every other error is retriable: the driver resumes from the
// destination log end offset after a backoff.
var fatal = []error{
	ErrCorruptBatch, ErrMessageFormat, ErrTransactionAborted, ErrBatchStraddle, ErrDivergence, ErrExactness, ErrNotSuperUser,
	ErrAppendRejected, ErrSourceRejected, ErrSourceClusterChanged, ErrSourceTopicRecreated, ErrOffsetMapFull,
}

// permanent are the fatal errors past which a restart would resume
// without repairing anything (a replayed transaction the destination
// aborted, another writer's records): only an operator restarts such a
// partition (PartitionStatus.Permanent).
var permanent = []error{ErrTransactionAborted, ErrExactness}

// IsFatal reports whether err fails the partition (FAILED, no automatic
// retry by the driver; the coordinator may retry it, DESIGN D12).
func IsFatal(err error) bool { return isAny(err, fatal) }

// IsPermanent reports whether err fails the partition for good: the
// coordinator does not retry it automatically.
func IsPermanent(err error) bool { return isAny(err, permanent) }

func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// errFollowerFetch marks an error of a fetch from a preferred read replica
// (KIP-392): the partition goes back to its leader, and only the leader's
// errors say anything about gaps or truncation. An internal signal.
var errFollowerFetch = errors.New("fetcher: fetch from a source follower failed: back to the leader")
