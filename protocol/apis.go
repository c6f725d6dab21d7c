package protocol

import (
	"slices"
	"strconv"
)

// API keys of the admin endpoint. ApiVersions, DescribeConfigs and
// IncrementalAlterConfigs are Kafka's own; the mirror APIs of KIP-1279 have
// no assigned keys yet ("TBD"), so sidemirror uses a private block from 1000
// up, far from Kafka's keys, also for its own APIs.
const (
	// KeyApiVersions is Kafka's ApiVersions (versions 0-3), answered by the
	// Server itself from this registry.
	KeyApiVersions int16 = 18
	// KeyDescribeConfigs is Kafka's DescribeConfigs (versions 0-4), served
	// for CLUSTER_MIRROR (64) resources: a mirror's configuration.
	KeyDescribeConfigs int16 = 32
	// KeyIncrementalAlterConfigs is Kafka's IncrementalAlterConfigs
	// (versions 0-1), served for CLUSTER_MIRROR (64) resources.
	KeyIncrementalAlterConfigs int16 = 44

	// KeyCreateClusterMirror creates a mirror and stores its configuration.
	KeyCreateClusterMirror int16 = 1000
	// KeyDeleteClusterMirror deletes a mirror that is empty or fully stopped.
	KeyDeleteClusterMirror int16 = 1001
	// KeyListClusterMirrors lists mirrors with their source and topic count.
	KeyListClusterMirrors int16 = 1002
	// KeyDescribeClusterMirrors reports state, offsets and lag per mirror
	// partition.
	KeyDescribeClusterMirrors int16 = 1003
	// KeyStartMirrorTopics starts mirroring topics.
	KeyStartMirrorTopics int16 = 1004
	// KeyStopMirrorTopics stops mirroring topics, which become writable
	// (failover).
	KeyStopMirrorTopics int16 = 1005
	// KeyPauseMirrorTopics pauses mirroring; the topics stay read-only.
	KeyPauseMirrorTopics int16 = 1006
	// KeyResumeMirrorTopics resumes paused topics.
	KeyResumeMirrorTopics int16 = 1007
	// KeyReadMirrorStates reads partition states from a mirror's
	// coordinator (internal).
	KeyReadMirrorStates int16 = 1008
	// KeyWriteMirrorStates persists partition state transitions through a
	// mirror's coordinator (internal).
	KeyWriteMirrorStates int16 = 1009
	// KeyApplyCommand forwards a raft command from a follower sidecar to the
	// raft leader (internal, sidemirror only).
	KeyApplyCommand int16 = 1010
	// KeyDescribeLocalPartitions asks one sidecar for the describe rows of
	// the mirror partitions it owns (internal, sidemirror only).
	KeyDescribeLocalPartitions int16 = 1011
	// KeyAddSidecar adds a sidecar to the raft group (sidemirror only).
	KeyAddSidecar int16 = 1012
	// KeyRemoveSidecar removes a sidecar from the raft group (sidemirror
	// only).
	KeyRemoveSidecar int16 = 1013
	// KeyDescribeSidecars lists the raft group's members and its leader
	// (sidemirror only).
	KeyDescribeSidecars int16 = 1014
	// KeyRecoverMirrorTopics restarts the FAILED partitions of mirror topics
	// (sidemirror only: the KIP names no RPC for it).
	KeyRecoverMirrorTopics int16 = 1015
)

// Message is what requests and responses have in common.
type Message interface {
	// Key returns the API key.
	Key() int16
	// Version returns the version the message is encoded with.
	Version() int16
	// SetVersion sets the version the message is encoded with.
	SetVersion(version int16)
	// AppendTo appends the message body (no header) to dst.
	AppendTo(dst []byte) []byte
	// ReadFrom decodes a message body (no header) of the message's version,
	// replacing every field. Unknown tagged fields are skipped.
	ReadFrom(src []byte) error
}

// Request is a request body of one API.
type Request interface {
	Message
	// ResponseKind returns an empty response of the same API and version.
	ResponseKind() Response
}

// Response is a response body of one API.
type Response interface {
	Message
}

// API describes one API of the admin endpoint.
type API struct {
	Key          int16  // API key
	Name         string // Kafka-style name, such as "CreateClusterMirror"
	MinVersion   int16  // lowest supported version
	MaxVersion   int16  // highest supported version
	FlexibleFrom int16  // first version with compact encodings and tagged fields
	Internal     bool   // spoken between sidecars only, not by the CLI

	// NewRequest returns an empty request; NewResponse an empty response.
	// Both are of version 0: call SetVersion before decoding another one.
	NewRequest  func() Request
	NewResponse func() Response
}

// SupportsVersion reports whether version is within [MinVersion, MaxVersion].
func (a API) SupportsVersion(version int16) bool {
	return version >= a.MinVersion && version <= a.MaxVersion
}

// Flexible reports whether version uses compact encodings, tagged fields and
// request header v2.
func (a API) Flexible(version int16) bool { return version >= a.FlexibleFrom }

// apis is the registry, sorted by key.
var apis = []API{
	{
		Key: KeyApiVersions, Name: "ApiVersions", MinVersion: 0, MaxVersion: 3, FlexibleFrom: 3,
		NewRequest:  func() Request { return new(ApiVersionsRequest) },
		NewResponse: func() Response { return NewApiVersionsResponse() },
	},
	{
		Key: KeyDescribeConfigs, Name: "DescribeConfigs", MinVersion: 0, MaxVersion: 4, FlexibleFrom: 4,
		NewRequest:  func() Request { return new(DescribeConfigsRequest) },
		NewResponse: func() Response { return new(DescribeConfigsResponse) },
	},
	{
		Key: KeyIncrementalAlterConfigs, Name: "IncrementalAlterConfigs", MinVersion: 0, MaxVersion: 1, FlexibleFrom: 1,
		NewRequest:  func() Request { return new(IncrementalAlterConfigsRequest) },
		NewResponse: func() Response { return new(IncrementalAlterConfigsResponse) },
	},
	{
		Key: KeyCreateClusterMirror, Name: "CreateClusterMirror",
		NewRequest:  func() Request { return new(CreateClusterMirrorRequest) },
		NewResponse: func() Response { return new(CreateClusterMirrorResponse) },
	},
	{
		Key: KeyDeleteClusterMirror, Name: "DeleteClusterMirror",
		NewRequest:  func() Request { return new(DeleteClusterMirrorRequest) },
		NewResponse: func() Response { return new(DeleteClusterMirrorResponse) },
	},
	{
		Key: KeyListClusterMirrors, Name: "ListClusterMirrors",
		NewRequest:  func() Request { return new(ListClusterMirrorsRequest) },
		NewResponse: func() Response { return new(ListClusterMirrorsResponse) },
	},
	{
		Key: KeyDescribeClusterMirrors, Name: "DescribeClusterMirrors",
		NewRequest:  func() Request { return new(DescribeClusterMirrorsRequest) },
		NewResponse: func() Response { return new(DescribeClusterMirrorsResponse) },
	},
	{
		Key: KeyStartMirrorTopics, Name: "StartMirrorTopics",
		NewRequest:  func() Request { return new(StartMirrorTopicsRequest) },
		NewResponse: func() Response { return new(StartMirrorTopicsResponse) },
	},
	{
		Key: KeyStopMirrorTopics, Name: "StopMirrorTopics",
		NewRequest:  func() Request { return new(StopMirrorTopicsRequest) },
		NewResponse: func() Response { return new(StopMirrorTopicsResponse) },
	},
	{
		Key: KeyPauseMirrorTopics, Name: "PauseMirrorTopics",
		NewRequest:  func() Request { return new(PauseMirrorTopicsRequest) },
		NewResponse: func() Response { return new(PauseMirrorTopicsResponse) },
	},
	{
		Key: KeyResumeMirrorTopics, Name: "ResumeMirrorTopics",
		NewRequest:  func() Request { return new(ResumeMirrorTopicsRequest) },
		NewResponse: func() Response { return new(ResumeMirrorTopicsResponse) },
	},
	{
		Key: KeyReadMirrorStates, Name: "ReadMirrorStates", Internal: true,
		NewRequest:  func() Request { return new(ReadMirrorStatesRequest) },
		NewResponse: func() Response { return new(ReadMirrorStatesResponse) },
	},
	{
		Key: KeyWriteMirrorStates, Name: "WriteMirrorStates", Internal: true,
		NewRequest:  func() Request { return new(WriteMirrorStatesRequest) },
		NewResponse: func() Response { return new(WriteMirrorStatesResponse) },
	},
	{
		Key: KeyApplyCommand, Name: "ApplyCommand", Internal: true,
		NewRequest:  func() Request { return new(ApplyCommandRequest) },
		NewResponse: func() Response { return new(ApplyCommandResponse) },
	},
	{
		Key: KeyDescribeLocalPartitions, Name: "DescribeLocalPartitions", Internal: true,
		NewRequest:  func() Request { return new(DescribeLocalPartitionsRequest) },
		NewResponse: func() Response { return new(DescribeLocalPartitionsResponse) },
	},
	{
		Key: KeyAddSidecar, Name: "AddSidecar",
		NewRequest:  func() Request { return new(AddSidecarRequest) },
		NewResponse: func() Response { return new(AddSidecarResponse) },
	},
	{
		Key: KeyRemoveSidecar, Name: "RemoveSidecar",
		NewRequest:  func() Request { return new(RemoveSidecarRequest) },
		NewResponse: func() Response { return new(RemoveSidecarResponse) },
	},
	{
		Key: KeyDescribeSidecars, Name: "DescribeSidecars",
		NewRequest:  func() Request { return new(DescribeSidecarsRequest) },
		NewResponse: func() Response { return new(DescribeSidecarsResponse) },
	},
	{
		Key: KeyRecoverMirrorTopics, Name: "RecoverMirrorTopics",
		NewRequest:  func() Request { return new(RecoverMirrorTopicsRequest) },
		NewResponse: func() Response { return new(RecoverMirrorTopicsResponse) },
	},
}

func init() {
	apis = append(apis, kafkaAPIs...)
	slices.SortFunc(apis, func(a, b API) int { return int(a.Key) - int(b.Key) })
}

// APIs returns the registry, sorted by key.
func APIs() []API { return slices.Clone(apis) }

// LookupAPI returns the registry entry for key.
func LookupAPI(key int16) (API, bool) {
	i, found := slices.BinarySearchFunc(apis, key, func(a API, k int16) int { return int(a.Key) - int(k) })
	if !found {
		return API{}, false
	}
	return apis[i], true
}

// KeyName returns the name of an API key, or "Unknown(<key>)".
func KeyName(key int16) string {
	if a, ok := LookupAPI(key); ok {
		return a.Name
	}
	return "Unknown(" + strconv.Itoa(int(key)) + ")"
}

// NewRequest returns an empty request for key at version.
func NewRequest(key, version int16) (Request, error) {
	a, ok := LookupAPI(key)
	if !ok {
		return nil, ErrUnknownAPIKey
	}
	if !a.SupportsVersion(version) {
		return nil, ErrUnsupportedVersion
	}
	r := a.NewRequest()
	r.SetVersion(version)
	return r, nil
}

// responseHeaderFlexible reports whether a response uses response header v1
// (correlation ID and tagged fields) rather than v0. ApiVersions always
// answers with header v0, so that a client can read it whatever version it
// asked for.
func responseHeaderFlexible(key, version int16) bool {
	if key == KeyApiVersions {
		return false
	}
	a, ok := LookupAPI(key)
	return ok && a.Flexible(version)
}

// requestHeaderFlexible reports whether a request of key and version uses
// request header v2 (with tagged fields) rather than v1. Versions above the
// registry's maximum are flexible, as the flexible versions of every API
// here are open ended. An unknown key is read with header v1, the shorter
// one, so that the server can report the key rather than a header it cannot
// parse.
func requestHeaderFlexible(key, version int16) bool {
	a, ok := LookupAPI(key)
	return ok && a.Flexible(version)
}
