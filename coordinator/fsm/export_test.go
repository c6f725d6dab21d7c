package fsm

// Internals the external tests (package fsm_test) look at.

// CurrentVersion returns the version EncodeCommand writes for t.
func CurrentVersion(t CommandType) uint8 { return codecs[t].current }

// CommandTypes returns every command type DecodeCommand knows.
func CommandTypes() []CommandType {
	out := make([]CommandType, 0, len(codecs))
	for t := range codecs {
		out = append(out, t)
	}
	return out
}
