package sidecar

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry returns the sidecar's own Prometheus registry (never the
// global default one, so tests and embedders get no duplicate
// registrations) with the Go runtime and process collectors and
// sidemirror_build_info.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sidemirror_build_info",
		Help:        "Always 1; the labels name the version and commit of the running sidemirror.",
		ConstLabels: prometheus.Labels{"version": Version, "commit": Commit},
	})
	buildInfo.Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo,
	)
	return reg
}
