package relockotel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/relock-go/relock/reentrant"
)

// scope names the instrumentation scope of the meter and tracer.
const scope = "github.com/relock-go/relock/otel"

// version is the module's version as the binary was built with it, for the
// instrumentation scope: "(devel)" in its own tests and when replaced by a
// local copy.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == scope {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == scope {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}

// DurationBuckets are the bucket boundaries, in seconds, advised on the
// duration histograms: from 100 µs (an uncontended acquire near Redis) to
// a minute (a long wait), about three per decade. The SDK's default
// boundaries start at 5 (seconds, here), which would put nearly every
// acquire and renewal in the first bucket. A view can still replace them.
var DurationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Option configures NewHooks.
type Option func(*config)

type config struct {
	meters   metric.MeterProvider
	tracers  trace.TracerProvider
	names    bool
	template func(name string) string
}

// WithMeterProvider sets where metrics go. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithTracerProvider sets where spans go. Default
// otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithLockNames adds the lock's or synchronizer's name to every span and
// metric, as relock.name. Off by default: each name would be a time
// series of its own.
func WithLockNames() Option {
	return func(c *config) { c.names = true }
}

// WithNameTemplate adds the lock's or synchronizer's name to every span and
// metric as relock.name, as WithLockNames does, but passed through
// template first: names that carry an id ("order:8123") map to the
// template they were made from ("order:{id}"), so each template, not each
// name, is a time series of its own. template must be cheap and must
// not block: it runs on every acquire and release.
func WithNameTemplate(template func(name string) string) Option {
	return func(c *config) { c.names, c.template = true, template }
}

// The attributes.
const (
	kindKey     = attribute.Key("relock.kind")    // Acquire.Kind
	nameKey     = attribute.Key("relock.name")    // with WithLockNames
	outcomeKey  = attribute.Key("relock.outcome") // acquired, not_acquired, error
	reasonKey   = attribute.Key("relock.reason")  // why a hold was lost
	attemptsKey = attribute.Key("relock.attempts")
	priorityKey = attribute.Key("relock.priority") // a priority lock's acquires
	cycleKey    = attribute.Key("relock.cycle.length")
	errorKey    = attribute.Key("error.type") // on every failure: see errorType
)

// LagBuckets are the bucket boundaries advised on relock.renewal.lag, a
// fraction of the TTL: a round trip on a quiet network is under 0.001 of
// Redisson's 30 s; a sixth (0.1667) makes holds late (Hooks.RenewalLate);
// 0.9 is the loss.
var LagBuckets = []float64{0.0001, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.1667, 0.25, 0.5, 0.9}

type instruments struct {
	cfg config
	// options caches each series' measurement option (see measure),
	// when the series are bounded: without names, or with a template.
	options   sync.Map // series -> *measured
	cache     bool
	spans     bool // false for a no-op tracer provider: no span is started
	tracer    trace.Tracer
	acquire   metric.Float64Histogram
	holds     gauge // relock.holds
	lost      metric.Int64Counter
	ended     metric.Int64Counter
	stalled   metric.Int64Counter
	renewal   metric.Float64Histogram
	failures  metric.Int64Counter
	wakes     metric.Int64Counter
	deadlocks metric.Int64Counter
	held      metric.Float64Histogram
	contended metric.Int64Counter
	waiting   gauge // relock.waiting
	lag       metric.Float64Histogram
	late      metric.Int64Counter
}

// NewHooks returns hooks that record, for every Client they are given to:
//
//   - relock.acquire.duration (s): how long each acquire call took, by
//     relock.kind and relock.outcome;
//   - relock.holds: holds in progress (locks held, permits taken), by kind;
//   - relock.lost: holds lost, by kind and relock.reason (gone: Redis no
//     longer has it; unconfirmed: renewals got no answer until the local
//     deadline);
//   - relock.lease.ended: LeaseFor holds whose lease ran its course before
//     their Unlock, by kind: not a loss, but work past the lease's end was
//     not protected;
//   - relock.stalled: holds given back because the work under them went
//     its progress deadline without a report (reentrant.ProgressWithin,
//     reentrant.ErrStalled), by kind;
//   - relock.renewal.duration (s) and relock.renewal.failures: the
//     watchdog's renewal rounds and the holds they failed to renew;
//   - relock.wakes: waiters woken by a release message, by kind;
//   - relock.deadlocks: waits given up on a cycle of owners waiting for
//     each other (reentrant.ErrDeadlock), by the cycle's length
//     (relock.cycle.length);
//   - relock.hold.duration (s): how long each hold lasted, from its
//     acquire's send to its end, by kind and relock.outcome (released,
//     lost, stalled, lease_ended, closed);
//   - relock.acquire.contended: acquire calls that found what they asked
//     for taken (more than one attempt, or not acquired), by kind and
//     outcome: contention that acquire times alone hide;
//   - relock.waiting: acquire calls in progress, waiters included, by kind;
//   - relock.renewal.lag (fraction of the TTL): how late each confirmed
//     renewal round came against its schedule (reentrant.Renewal.Lag);
//   - relock.renewal.late: holds whose renewals fell behind, told before
//     they were lost (reentrant.Hooks.RenewalLate), by kind;
//
// Every failure carries error.type (see the table in docs/observability.md):
// a bounded name of what went wrong.
//
// and a span for each acquire call (relock.acquire), each hold from its
// acquire to its end (relock.hold), and each release (relock.release),
// with relock.kind and the outcome, under the span of the ctx the lock was
// taken with.
func NewHooks(opts ...Option) (reentrant.Hooks, error) {
	cfg := config{meters: otel.GetMeterProvider(), tracers: otel.GetTracerProvider()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.meters == nil || cfg.tracers == nil {
		return reentrant.Hooks{}, fmt.Errorf("relockotel: %w: nil provider", reentrant.ErrInvalidArgument)
	}
	v := version()
	in := &instruments{cfg: cfg, tracer: cfg.tracers.Tracer(scope, trace.WithInstrumentationVersion(v)), cache: !cfg.names || cfg.template != nil}
	_, noSpans := cfg.tracers.(noop.TracerProvider)
	in.spans = !noSpans
	meter := cfg.meters.Meter(scope, metric.WithInstrumentationVersion(v))
	var errs [14]error
	in.acquire, errs[0] = meter.Float64Histogram("relock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long acquire calls took, waiting included."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	_, errs[1] = meter.Int64ObservableUpDownCounter("relock.holds", metric.WithUnit("{hold}"),
		metric.WithDescription("Locks held and permits taken, in progress."), metric.WithInt64Callback(in.holds.observe))
	in.lost, errs[2] = meter.Int64Counter("relock.lost", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost before they were given back."))
	in.renewal, errs[3] = meter.Float64Histogram("relock.renewal.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the watchdog's renewal rounds took."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	in.failures, errs[4] = meter.Int64Counter("relock.renewal.failures", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds a renewal round did not renew."))
	in.wakes, errs[5] = meter.Int64Counter("relock.wakes", metric.WithUnit("{wake}"),
		metric.WithDescription("Waiters woken by a release message."))
	in.ended, errs[6] = meter.Int64Counter("relock.lease.ended", metric.WithUnit("{hold}"),
		metric.WithDescription("LeaseFor holds whose lease ended before they were given back."))
	in.deadlocks, errs[7] = meter.Int64Counter("relock.deadlocks", metric.WithUnit("{wait}"),
		metric.WithDescription("Waits given up on a cycle of owners waiting for each other."))
	in.stalled, errs[8] = meter.Int64Counter("relock.stalled", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds given back because their work reported no progress within its deadline."))
	in.held, errs[9] = meter.Float64Histogram("relock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted, from their acquire's send to their end."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	in.contended, errs[10] = meter.Int64Counter("relock.acquire.contended", metric.WithUnit("{call}"),
		metric.WithDescription("Acquire calls that found what they asked for taken."))
	_, errs[11] = meter.Int64ObservableUpDownCounter("relock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Acquire calls in progress, waiters included."), metric.WithInt64Callback(in.waiting.observe))
	in.lag, errs[12] = meter.Float64Histogram("relock.renewal.lag", metric.WithUnit("1"),
		metric.WithDescription("How late renewal rounds were confirmed against their schedule, as a fraction of the TTL."),
		metric.WithExplicitBucketBoundaries(LagBuckets...))
	in.late, errs[13] = meter.Int64Counter("relock.renewal.late", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds whose renewals fell behind, told before they were lost."))
	if err := errors.Join(errs[:]...); err != nil {
		return reentrant.Hooks{}, fmt.Errorf("relockotel: %w", err)
	}
	return reentrant.Hooks{
		AcquireStarted: in.acquireStarted,
		AcquireEnded:   in.acquireEnded,
		HoldEnded:      in.holdEnded,
		Renewed:        in.renewed,
		Woken:          in.woken,
		Deadlock:       in.deadlock,
		RenewalLate:    in.renewalLate,
	}, nil
}

func (in *instruments) attrs(kind reentrant.Kind, name string, more ...attribute.KeyValue) []attribute.KeyValue {
	kv := append(make([]attribute.KeyValue, 0, 2+len(more)), kindKey.String(string(kind)))
	if in.cfg.names {
		kv = append(kv, nameKey.String(in.named(name)))
	}
	return append(kv, more...)
}

// named is name as relock.name records it: through the template, if any;
// "" without names.
func (in *instruments) named(name string) string {
	switch {
	case !in.cfg.names:
		return ""
	case in.cfg.template != nil:
		return in.cfg.template(name)
	}
	return name
}

// series is the attributes of one time series.
type series struct {
	kind     reentrant.Kind
	name     string // as named() gives it
	outcome  string // relock.outcome; "": none
	errType  string // error.type; "": none
	reason   string // relock.reason; "": none
	priority int    // relock.priority + 1; 0: none
}

// gauge is an up-down count by series, kept in atomics and observed when
// the metrics are collected: a change is one atomic add, not a
// measurement, and holds and waits change twice on every acquisition.
type gauge struct {
	counts sync.Map // series -> *gaugeCount
}

type gaugeCount struct {
	n   atomic.Int64
	opt metric.ObserveOption
}

// add adds d to series s's count.
func (g *gauge) add(in *instruments, s series, d int64) {
	c, ok := g.counts.Load(s)
	if !ok {
		c, _ = g.counts.LoadOrStore(s, &gaugeCount{opt: in.measure(s).observe})
	}
	c.(*gaugeCount).n.Add(d)
}

// observe is the instrument's callback.
func (g *gauge) observe(_ context.Context, o metric.Int64Observer) error {
	g.counts.Range(func(_, c any) bool {
		o.Observe(c.(*gaugeCount).n.Load(), c.(*gaugeCount).opt)
		return true
	})
	return nil
}

// measured is a series' options, as an instrument's Add or Record takes
// them: a slice kept whole, which passes without an allocation.
type measured struct {
	add     []metric.AddOption
	record  []metric.RecordOption
	observe metric.ObserveOption
}

// measure returns the options of series s. Building an attribute set sorts
// and copies its attributes, and a hook call makes several measurements:
// each series' options are built once and kept, where the series are
// bounded (the SDK keeps a series for each anyway).
func (in *instruments) measure(s series) *measured {
	if in.cache {
		if m, ok := in.options.Load(s); ok {
			return m.(*measured)
		}
	}
	kv := make([]attribute.KeyValue, 0, 6)
	kv = append(kv, kindKey.String(string(s.kind)))
	if in.cfg.names {
		kv = append(kv, nameKey.String(s.name))
	}
	for _, a := range []struct {
		key attribute.Key
		v   string
	}{{outcomeKey, s.outcome}, {errorKey, s.errType}, {reasonKey, s.reason}} {
		if a.v != "" {
			kv = append(kv, a.key.String(a.v))
		}
	}
	if s.priority > 0 {
		kv = append(kv, priorityKey.Int(s.priority-1))
	}
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	m := &measured{add: []metric.AddOption{o}, record: []metric.RecordOption{o}, observe: o}
	if in.cache {
		in.options.Store(s, m)
	}
	return m
}

// errorType names what went wrong, for error.type: one of a few values
// whatever the error's text, so that it stays a bounded attribute.
func errorType(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{reentrant.ErrLockLost, "lost"},
		{reentrant.ErrStalled, "stalled"},
		{reentrant.ErrLeaseEnded, "lease_ended"},
		{reentrant.ErrDeadlock, "deadlock"},
		{reentrant.ErrClosed, "closed"},
		{reentrant.ErrNotHeld, "not_held"},
		{reentrant.ErrReentry, "reentry"},
		{reentrant.ErrWrongType, "wrong_type"},
		{reentrant.ErrInvalidArgument, "invalid_argument"},
		{reentrant.ErrNoPermission, "no_permission"},
		{reentrant.ErrNotSynced, "not_synced"},
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "canceled"},
	} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	var op *net.OpError
	if errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection"
	}
	return "_OTHER"
}

func (in *instruments) acquireStarted(ctx context.Context, a reentrant.Acquire) {
	in.waiting.add(in, series{kind: a.Kind, name: in.named(a.Name)}, 1)
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, reentrant.ErrNotAcquired):
		return "not_acquired"
	}
	return "error"
}

func (in *instruments) acquireEnded(ctx context.Context, a reentrant.Acquire) {
	name := in.named(a.Name)
	in.waiting.add(in, series{kind: a.Kind, name: name}, -1)
	sr := series{kind: a.Kind, name: name, outcome: outcome(a.Err)}
	if sr.outcome == "error" {
		sr.errType = errorType(a.Err)
	}
	if a.Attempts > 1 || errors.Is(a.Err, reentrant.ErrNotAcquired) {
		in.contended.Add(ctx, 1, in.measure(sr).add...)
	}
	if a.Kind == reentrant.KindPriority {
		// 256 values at most: a bounded attribute, so acquire times can
		// be read per priority.
		sr.priority = a.Priority + 1
	}
	in.acquire.Record(ctx, a.Waited.Seconds(), in.measure(sr).record...)
	if a.Held {
		in.holds.add(in, series{kind: a.Kind, name: name}, 1)
	}
	if !in.spans {
		return
	}
	_, span := in.tracer.Start(ctx, "relock.acquire", trace.WithTimestamp(a.Start))
	if !span.IsRecording() {
		return
	}
	kv := in.attrs(a.Kind, a.Name, outcomeKey.String(sr.outcome), attemptsKey.Int(a.Attempts))
	if sr.errType != "" {
		kv = append(kv, errorKey.String(sr.errType))
	}
	if sr.priority > 0 {
		kv = append(kv, priorityKey.Int(a.Priority))
	}
	span.SetAttributes(kv...)
	if sr.outcome == "error" {
		span.RecordError(a.Err)
		span.SetStatus(codes.Error, a.Err.Error())
	}
	span.End(trace.WithTimestamp(a.Start.Add(a.Waited)))
}

// reason names why a hold was lost: renewals went unconfirmed until the
// local deadline (Redis unreachable), or Redis no longer had it
// (ErrNotRenewed, or found so by Unlock).
func reason(cause error) string {
	if errors.Is(cause, reentrant.ErrUnconfirmed) {
		return "unconfirmed"
	}
	return "gone"
}

func (in *instruments) holdEnded(ctx context.Context, e reentrant.HoldEnd) {
	name := in.named(e.Name)
	plain := series{kind: e.Kind, name: name}
	in.holds.add(in, plain, -1)
	end := time.Now()
	lost := errors.Is(e.Cause, reentrant.ErrLockLost)
	stalled := errors.Is(e.Cause, reentrant.ErrStalled)
	held := series{kind: e.Kind, name: name, outcome: "released"}
	switch {
	case e.Cause != nil:
		held.outcome = errorType(e.Cause)
		held.errType = held.outcome
	case e.Err != nil:
		held.errType = errorType(e.Err)
	}
	in.held.Record(ctx, e.Held.Seconds(), in.measure(held).record...)
	switch {
	case lost:
		in.lost.Add(ctx, 1, in.measure(series{kind: e.Kind, name: name, reason: reason(e.Cause)}).add...)
	case stalled:
		in.stalled.Add(ctx, 1, in.measure(plain).add...)
	case errors.Is(e.Cause, reentrant.ErrLeaseEnded):
		in.ended.Add(ctx, 1, in.measure(plain).add...)
	}
	if !in.spans {
		return
	}
	hctx, hold := in.tracer.Start(ctx, "relock.hold", trace.WithTimestamp(end.Add(-e.Held)))
	if !hold.IsRecording() {
		return
	}
	kv := in.attrs(e.Kind, e.Name)
	if lost {
		kv = append(kv, reasonKey.String(reason(e.Cause)))
	}
	hold.SetAttributes(kv...)
	if lost || stalled {
		hold.SetStatus(codes.Error, e.Cause.Error())
	}
	if e.Releasing > 0 {
		_, rel := in.tracer.Start(hctx, "relock.release", trace.WithTimestamp(end.Add(-e.Releasing)), trace.WithAttributes(in.attrs(e.Kind, e.Name)...))
		if e.Err != nil {
			rel.RecordError(e.Err)
			rel.SetStatus(codes.Error, e.Err.Error())
		}
		rel.End(trace.WithTimestamp(end))
	}
	hold.End(trace.WithTimestamp(end))
}

func (in *instruments) renewed(r reentrant.Renewal) {
	ctx := context.Background()
	in.renewal.Record(ctx, r.Duration.Seconds())
	if r.Failed > 0 {
		why := "gone" // found gone; or the round's error
		if r.Err != nil {
			why = errorType(r.Err)
		}
		in.failures.Add(ctx, int64(r.Failed), metric.WithAttributes(errorKey.String(why)))
	}
	if r.Err == nil && r.TTL > 0 {
		in.lag.Record(ctx, float64(r.Lag)/float64(r.TTL))
	}
}

func (in *instruments) renewalLate(ctx context.Context, l reentrant.LateRenewal) {
	in.late.Add(ctx, 1, in.measure(series{kind: l.Kind, name: in.named(l.Name)}).add...)
}

func (in *instruments) woken(ctx context.Context, kind reentrant.Kind, name string) {
	in.wakes.Add(ctx, 1, in.measure(series{kind: kind, name: in.named(name)}).add...)
}

func (in *instruments) deadlock(ctx context.Context, e *reentrant.DeadlockError) {
	in.deadlocks.Add(ctx, 1, metric.WithAttributes(cycleKey.Int(len(e.Cycle))))
}
