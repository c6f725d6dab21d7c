package protocol

import "github.com/twmb/franz-go/pkg/kbin"

// ApplyCommand (key 1010, internal, sidemirror only): a follower sidecar
// forwards an encoded raft command to the raft leader, which applies it and
// returns the FSM's encoded result (DESIGN.md D5). A request that reaches a
// sidecar that is not the leader gets NOT_CONTROLLER.
//
//	{
//	  "apiKey": 1010,
//	  "type": "request",
//	  "name": "ApplyCommandRequest",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "Command", "type": "bytes", "versions": "0+",
//	      "about": "The encoded, versioned raft command." }
//	  ]
//	}
//
//	{
//	  "apiKey": 1010,
//	  "type": "response",
//	  "name": "ApplyCommandResponse",
//	  "validVersions": "0",
//	  "flexibleVersions": "0+",
//	  "fields": [
//	    { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+" },
//	    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
//	    { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" },
//	    { "name": "Result", "type": "bytes", "versions": "0+",
//	      "about": "The encoded result of applying the command." }
//	  ]
//	}

// ApplyCommandRequest forwards a raft command to the raft leader.
type ApplyCommandRequest struct {
	versioned
	Command []byte `json:"command"`
}

// Key returns KeyApplyCommand.
func (*ApplyCommandRequest) Key() int16 { return KeyApplyCommand }

// ResponseKind returns an empty ApplyCommandResponse.
func (v *ApplyCommandRequest) ResponseKind() Response {
	return &ApplyCommandResponse{versioned: v.versioned}
}

// AppendTo appends the request body.
func (v *ApplyCommandRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactBytes(dst, v.Command)
	return appendNoTags(dst)
}

// ReadFrom decodes a request body. Command is a copy, not a view of src.
func (v *ApplyCommandRequest) ReadFrom(src []byte) error {
	*v = ApplyCommandRequest{versioned: v.versioned}
	d := newRequestDecoder(src)
	v.Command = d.bytes()
	d.tags(nil)
	return d.finish()
}

// ApplyCommandResponse answers ApplyCommandRequest.
type ApplyCommandResponse struct {
	versioned
	ThrottleTimeMs int32   `json:"throttleTimeMs"`
	ErrorCode      int16   `json:"errorCode"`
	ErrorMessage   *string `json:"errorMessage"`
	Result         []byte  `json:"result"`
}

// Key returns KeyApplyCommand.
func (*ApplyCommandResponse) Key() int16 { return KeyApplyCommand }

// AppendTo appends the response body.
func (v *ApplyCommandResponse) AppendTo(dst []byte) []byte {
	dst = appendStatus(dst, v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage)
	dst = kbin.AppendCompactBytes(dst, v.Result)
	return appendNoTags(dst)
}

// ReadFrom decodes a response body. Result is a copy, not a view of src.
func (v *ApplyCommandResponse) ReadFrom(src []byte) error {
	*v = ApplyCommandResponse{versioned: v.versioned}
	d := newDecoder(src)
	v.ThrottleTimeMs, v.ErrorCode, v.ErrorMessage = d.status()
	v.Result = d.bytes()
	d.tags(nil)
	return d.finish()
}
