package sidecar

// Version and Commit identify the build. Release builds set them with
//
//	go build -ldflags "-X github.com/sidemirror/sidemirror/sidecar.Version=1.0.0 \
//	    -X github.com/sidemirror/sidemirror/sidecar.Commit=$(git rev-parse --short HEAD)"
//
// They appear in `sidemirror version` and the sidemirror_build_info metric.
var (
	Version = "dev"
	Commit  = "unknown"
)
