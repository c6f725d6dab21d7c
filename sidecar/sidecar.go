package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// shutdownTimeout bounds the whole shutdown of Run.
const shutdownTimeout = 5 * time.Second

// Sidecar is one sidemirror daemon, running next to one broker of the
// destination cluster. Create it with New and run it with Run, once.
type Sidecar struct {
	cfg      Config
	log      *zap.Logger
	reg      *prometheus.Registry
	routines *routines

	started  atomic.Bool
	stopping atomic.Bool                // set when shutdown begins; /healthz turns 503
	ready    chan struct{}              // closed once every listener is bound
	comps    atomic.Pointer[components] // set once started: what /readyz checks
	status   *statusPage                // the status page at "/"
	httpAddr string                     // written before ready is closed
}

// New validates cfg and returns a Sidecar ready to Run. A nil log discards
// logs.
func New(cfg Config, log *zap.Logger) (*Sidecar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("sidecar")
	return &Sidecar{
		cfg:      cfg,
		log:      log,
		reg:      newRegistry(),
		routines: newRoutines(log),
		ready:    make(chan struct{}),
		status:   newStatusPage(cfg.LocalBrokerID, log),
	}, nil
}

// Ready is closed once Run has bound its listeners; HTTPAddr is valid from
// then on. If Run fails before that, Ready is never closed.
func (s *Sidecar) Ready() <-chan struct{} { return s.ready }

// HTTPAddr returns the bound address of http.listener (useful with port 0),
// or "" before Ready.
func (s *Sidecar) HTTPAddr() string {
	select {
	case <-s.ready:
		return s.httpAddr
	default:
		return ""
	}
}

// Run locks data.dir, serves /metrics and /healthz on http.listener and
// blocks until ctx is done or a server fails, then shuts down (see
// shutdown). It returns nil after a clean shutdown caused by ctx.
func (s *Sidecar) Run(ctx context.Context) (err error) {
	if !s.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	lock, err := lockDataDir(s.cfg.DataDir)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := lock.release(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sidecar: releasing the data.dir lock: %w", rerr))
		}
	}()

	ln, err := listen(KeyHTTPListener, s.cfg.HTTPListener)
	if err != nil {
		return err
	}
	ln = limitListener(ln, httpMaxConnections)
	srv := &http.Server{
		Handler:           s.httpHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.cfg.Limits.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	failed := make(chan error, 1) // the first runtime failure of a server
	s.routines.Go("http-server", func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("sidecar: %s %s: %w", KeyHTTPListener, ln.Addr(), err)
		}
	})

	comps, err := s.startComponents(failed)
	if err != nil {
		s.stopping.Store(true)
		s.routines.stop()
		_ = srv.Close()
		return err
	}
	s.comps.Store(comps)
	s.httpAddr = ln.Addr().String()
	close(s.ready)
	s.log.Info("sidecar running",
		zap.Int32("broker-id", s.cfg.LocalBrokerID),
		zap.String("data-dir", s.cfg.DataDir),
		zap.String("http-address", s.httpAddr))
	// The status page's sampler (status.go) and, under systemd's
	// Type=notify, READY=1 once a raft member that reaches its broker
	// (notify.go).
	bgCtx, stopBackground := context.WithCancel(context.Background())
	s.routines.Go("status-sampler", func() { s.status.run(bgCtx, comps.service) })
	// Whether the destination.* settings get through to the local broker,
	// logged in words (destcheck.go).
	s.routines.Go("destination-check", func() { checkDestination(bgCtx, comps.dest, s.cfg.Destination, s.log) })
	if os.Getenv(notifySocketEnv) != "" {
		s.routines.Go("sd-notify", func() { s.notifyWhenReady(bgCtx, comps) })
	}

	var runErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", zap.NamedError("reason", context.Cause(ctx)))
	case runErr = <-failed:
		s.log.Error("shutting down after a failure", zap.Error(runErr))
	}
	stopBackground()
	return errors.Join(runErr, s.shutdown(srv, comps))
}

// shutdown stops the sidecar within shutdownTimeout. The order, which later
// components slot into, is:
//
//  1. stop intake: /healthz reports 503 and systemd gets STOPPING=1 so
//     that orchestration sees the stop,
//     the admin endpoint stops accepting requests, no goroutine may start;
//  2. finish in-flight appends to the local broker and stop the fetchers;
//  3. persist partition state to __mirror_state;
//  4. step down from raft leadership (a peer takes over at once);
//  5. close raft and its stores;
//  6. close the Kafka clients;
//  7. close the HTTP server last, so /metrics and /healthz stay observable
//     during all of the above;
//  8. wait for every tracked goroutine.
//
// The data.dir lock is released by Run after shutdown returns, once nothing
// can write into data.dir any more.
func (s *Sidecar) shutdown(srv *http.Server, comps *components) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error

	// 1. Stop intake; tell systemd (Type=notify) the stop began.
	s.stopping.Store(true)
	s.notify("STOPPING=1")
	s.routines.stop()

	// 1 (admin endpoint) to 6.
	if err := comps.stop(ctx); err != nil {
		errs = append(errs, err)
	}

	// 7. HTTP server: let in-flight scrapes finish, cut them at the bound.
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
		errs = append(errs, fmt.Errorf("%w: %s: %v", ErrShutdownTimeout, KeyHTTPListener, err))
	}

	// 8. Goroutines.
	if err := s.routines.wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%w: goroutines still running after %s", ErrShutdownTimeout, shutdownTimeout))
	}
	if len(errs) == 0 {
		s.log.Info("shut down")
	}
	return errors.Join(errs...)
}

// httpHandler serves the status page at "/", /metrics and /healthz.
func (s *Sidecar) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", s.status)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.stopping.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "shutting down\n")
			return
		}
		fmt.Fprint(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", s.readyz) // readyz.go
	return mux
}

// listen opens a TCP listener; its error names the config key and address.
func listen(key, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Err != nil {
			err = opErr.Err // drop "listen tcp <addr>:", which we name already
		}
		return nil, fmt.Errorf("%w: %s %s: %v", ErrListen, key, addr, err)
	}
	return ln, nil
}
