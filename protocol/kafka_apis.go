package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's own SASL and ACL APIs, as the admin endpoint serves them: the
// messages are franz-go's kmsg types (Kafka's schemas, every version),
// wrapped to satisfy Request and Response. SaslHandshake (17, version 1)
// and SaslAuthenticate (36, versions 0-2) authenticate a connection on a
// SASL listener (the Server answers them itself, see SASLAuthenticator);
// DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 1-3,
// manage the ACLs of the CLUSTER_MIRROR (8) and CLUSTER (4) resources.

// API keys of Kafka's SASL and ACL APIs.
const (
	KeySaslHandshake    int16 = 17
	KeyDescribeAcls     int16 = 29
	KeyCreateAcls       int16 = 30
	KeyDeleteAcls       int16 = 31
	KeySaslAuthenticate int16 = 36
)

// SaslHandshakeRequest is Kafka's SaslHandshake request.
type SaslHandshakeRequest struct{ kmsg.SASLHandshakeRequest }

// Version returns the version the message is encoded with.
func (r *SaslHandshakeRequest) Version() int16 { return r.SASLHandshakeRequest.Version }

// ResponseKind returns an empty response of the same version.
func (r *SaslHandshakeRequest) ResponseKind() Response {
	return &SaslHandshakeResponse{kmsg.SASLHandshakeResponse{Version: r.Version()}}
}

// SaslHandshakeResponse is Kafka's SaslHandshake response.
type SaslHandshakeResponse struct{ kmsg.SASLHandshakeResponse }

// Version returns the version the message is encoded with.
func (r *SaslHandshakeResponse) Version() int16 { return r.SASLHandshakeResponse.Version }

// SaslAuthenticateRequest is Kafka's SaslAuthenticate request.
type SaslAuthenticateRequest struct{ kmsg.SASLAuthenticateRequest }

// Version returns the version the message is encoded with.
func (r *SaslAuthenticateRequest) Version() int16 { return r.SASLAuthenticateRequest.Version }

// ResponseKind returns an empty response of the same version.
func (r *SaslAuthenticateRequest) ResponseKind() Response {
	return &SaslAuthenticateResponse{kmsg.SASLAuthenticateResponse{Version: r.Version()}}
}

// SaslAuthenticateResponse is Kafka's SaslAuthenticate response.
type SaslAuthenticateResponse struct{ kmsg.SASLAuthenticateResponse }

// Version returns the version the message is encoded with.
func (r *SaslAuthenticateResponse) Version() int16 { return r.SASLAuthenticateResponse.Version }

// DescribeAclsRequest is Kafka's DescribeAcls request.
type DescribeAclsRequest struct{ kmsg.DescribeACLsRequest }

// Version returns the version the message is encoded with.
func (r *DescribeAclsRequest) Version() int16 { return r.DescribeACLsRequest.Version }

// ResponseKind returns an empty response of the same version.
func (r *DescribeAclsRequest) ResponseKind() Response {
	return &DescribeAclsResponse{kmsg.DescribeACLsResponse{Version: r.Version()}}
}

// DescribeAclsResponse is Kafka's DescribeAcls response.
type DescribeAclsResponse struct{ kmsg.DescribeACLsResponse }

// Version returns the version the message is encoded with.
func (r *DescribeAclsResponse) Version() int16 { return r.DescribeACLsResponse.Version }

// CreateAclsRequest is Kafka's CreateAcls request.
type CreateAclsRequest struct{ kmsg.CreateACLsRequest }

// Version returns the version the message is encoded with.
func (r *CreateAclsRequest) Version() int16 { return r.CreateACLsRequest.Version }

// ResponseKind returns an empty response of the same version.
func (r *CreateAclsRequest) ResponseKind() Response {
	return &CreateAclsResponse{kmsg.CreateACLsResponse{Version: r.Version()}}
}

// CreateAclsResponse is Kafka's CreateAcls response.
type CreateAclsResponse struct{ kmsg.CreateACLsResponse }

// Version returns the version the message is encoded with.
func (r *CreateAclsResponse) Version() int16 { return r.CreateACLsResponse.Version }

// DeleteAclsRequest is Kafka's DeleteAcls request.
type DeleteAclsRequest struct{ kmsg.DeleteACLsRequest }

// Version returns the version the message is encoded with.
func (r *DeleteAclsRequest) Version() int16 { return r.DeleteACLsRequest.Version }

// ResponseKind returns an empty response of the same version.
func (r *DeleteAclsRequest) ResponseKind() Response {
	return &DeleteAclsResponse{kmsg.DeleteACLsResponse{Version: r.Version()}}
}

// DeleteAclsResponse is Kafka's DeleteAcls response.
type DeleteAclsResponse struct{ kmsg.DeleteACLsResponse }

// Version returns the version the message is encoded with.
func (r *DeleteAclsResponse) Version() int16 { return r.DeleteACLsResponse.Version }

// kafkaAPIs are the registry entries of this file's APIs.
var kafkaAPIs = []API{
	{
		Key: KeySaslHandshake, Name: "SaslHandshake", MinVersion: 1, MaxVersion: 1, FlexibleFrom: 100,
		NewRequest:  func() Request { return new(SaslHandshakeRequest) },
		NewResponse: func() Response { return new(SaslHandshakeResponse) },
	},
	{
		Key: KeyDescribeAcls, Name: "DescribeAcls", MinVersion: 1, MaxVersion: 3, FlexibleFrom: 2,
		NewRequest:  func() Request { return new(DescribeAclsRequest) },
		NewResponse: func() Response { return new(DescribeAclsResponse) },
	},
	{
		Key: KeyCreateAcls, Name: "CreateAcls", MinVersion: 1, MaxVersion: 3, FlexibleFrom: 2,
		NewRequest:  func() Request { return new(CreateAclsRequest) },
		NewResponse: func() Response { return new(CreateAclsResponse) },
	},
	{
		Key: KeyDeleteAcls, Name: "DeleteAcls", MinVersion: 1, MaxVersion: 3, FlexibleFrom: 2,
		NewRequest:  func() Request { return new(DeleteAclsRequest) },
		NewResponse: func() Response { return new(DeleteAclsResponse) },
	},
	{
		Key: KeySaslAuthenticate, Name: "SaslAuthenticate", MinVersion: 0, MaxVersion: 2, FlexibleFrom: 2,
		NewRequest:  func() Request { return new(SaslAuthenticateRequest) },
		NewResponse: func() Response { return new(SaslAuthenticateResponse) },
	},
}

// ReadFrom methods decode with kmsg and, as every message of this package,
// refuse bytes that do not decode or that trail the message.

// ReadFrom decodes a body of the message's version.
func (r *SaslHandshakeRequest) ReadFrom(src []byte) error {
	return strictRead(&r.SASLHandshakeRequest, src)
}

// ReadFrom decodes a body of the message's version.
func (r *SaslHandshakeResponse) ReadFrom(src []byte) error {
	return strictRead(&r.SASLHandshakeResponse, src)
}

// ReadFrom decodes a body of the message's version.
func (r *SaslAuthenticateRequest) ReadFrom(src []byte) error {
	return strictRead(&r.SASLAuthenticateRequest, src)
}

// ReadFrom decodes a body of the message's version.
func (r *SaslAuthenticateResponse) ReadFrom(src []byte) error {
	return strictRead(&r.SASLAuthenticateResponse, src)
}

// ReadFrom decodes a body of the message's version.
func (r *DescribeAclsRequest) ReadFrom(src []byte) error {
	return strictRead(&r.DescribeACLsRequest, src)
}

// ReadFrom decodes a body of the message's version.
func (r *DescribeAclsResponse) ReadFrom(src []byte) error {
	return strictRead(&r.DescribeACLsResponse, src)
}

// ReadFrom decodes a body of the message's version.
func (r *CreateAclsRequest) ReadFrom(src []byte) error { return strictRead(&r.CreateACLsRequest, src) }

// ReadFrom decodes a body of the message's version.
func (r *CreateAclsResponse) ReadFrom(src []byte) error {
	return strictRead(&r.CreateACLsResponse, src)
}

// ReadFrom decodes a body of the message's version.
func (r *DeleteAclsRequest) ReadFrom(src []byte) error { return strictRead(&r.DeleteACLsRequest, src) }

// ReadFrom decodes a body of the message's version.
func (r *DeleteAclsResponse) ReadFrom(src []byte) error {
	return strictRead(&r.DeleteACLsResponse, src)
}

// kmsgBody is what strictRead needs of a kmsg message.
type kmsgBody interface {
	AppendTo(dst []byte) []byte
	ReadFrom(src []byte) error
}

// strictRead decodes src into m and checks that m re-encodes to as many
// bytes, so that trailing bytes are an error as elsewhere in this package.
func strictRead(m kmsgBody, src []byte) error {
	if err := m.ReadFrom(src); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if n := len(m.AppendTo(nil)); n != len(src) {
		return fmt.Errorf("%w: %d bytes after a %d-byte message", ErrMalformed, len(src)-n, n)
	}
	return nil
}
