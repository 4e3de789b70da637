package relockotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	relockotel "github.com/relock-go/relock/otel"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collect returns the data points of every metric, by metric name.
func collect(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Aggregation {
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// scopeVersion returns the version of the instrumentation scope that
// relock's metrics come from.
func scopeVersion(t *testing.T, r sdkmetric.Reader) string {
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	assert.Equal(t, "github.com/relock-go/relock/otel", rm.ScopeMetrics[0].Scope.Name)
	return rm.ScopeMetrics[0].Scope.Version
}

// count sums the points of a counter or histogram whose attributes include
// every one of want.
func count(a metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	has := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var n int64
	switch d := a.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes) {
				n += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if has(p.Attributes) {
				n += int64(p.Count)
			}
		}
	}
	return n
}

func TestHooksOnRealLocks(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tracers.Shutdown(context.Background())

	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(meters), relockotel.WithTracerProvider(tracers))
	require.NoError(t, err)
	locks, err := reentrant.New(srv.Client(), reentrant.Options{Hooks: hooks, WatchdogTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	defer locks.Close()
	other, err := reentrant.New(srv.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer other.Close()

	ctx, root := tracers.Tracer("test").Start(context.Background(), "job")
	err = locks.Do(ctx, "report", func(ctx context.Context) error {
		_, ok, err := other.Lock("report").TryLock(context.Background())
		require.NoError(t, err)
		require.False(t, ok)
		_, ok, err = locks.Lock("report").TryLock(reentrant.WithoutOwner(ctx))
		require.NoError(t, err)
		assert.False(t, ok, "a new owner of this client is refused")
		return nil
	})
	require.NoError(t, err)
	root.End()

	lost, err := locks.FencedLock("lost").Lock(context.Background())
	require.NoError(t, err)
	srv.Do("DEL", "lost")
	<-lost.Done()
	// A lease that runs its course is not a loss.
	leased, err := locks.Lock("leased").Lock(context.Background(), reentrant.LeaseFor(100*time.Millisecond))
	require.NoError(t, err)
	<-leased.Done()
	// Nor is a hold whose work stalled: it is given back, and counted so.
	stalled, err := locks.Lock("stalled").Lock(context.Background(), reentrant.ProgressWithin(50*time.Millisecond))
	require.NoError(t, err)
	<-stalled.Done()
	// A stall tells the work first, then gives the hold back: its
	// HoldEnded, which ends the hold's span and counts it, follows the
	// give-back's release.
	require.Eventually(t, func() bool {
		held := 0
		for _, s := range spans.Ended() {
			if s.Name() == "relock.hold" {
				held++
			}
		}
		return held == 4
	}, 10*time.Second, time.Millisecond, "the stalled hold's span ended after its give-back")

	m := collect(t, reader)
	for _, name := range []string{"relock.acquire.duration", "relock.renewal.duration"} {
		for _, d := range m[name].(metricdata.Histogram[float64]).DataPoints {
			assert.Equal(t, relockotel.DurationBuckets, d.Bounds, "%s: from 100 µs to a minute", name)
		}
	}
	assert.Equal(t, "(devel)", scopeVersion(t, reader), "the scope carries the module's version")
	kind := attribute.String("relock.kind", "lock")
	assert.Equal(t, int64(3), count(m["relock.acquire.duration"], kind, attribute.String("relock.outcome", "acquired")), "the job's, the leased and the stalled")
	assert.Equal(t, int64(1), count(m["relock.acquire.duration"], kind, attribute.String("relock.outcome", "not_acquired")))
	assert.Equal(t, int64(0), count(m["relock.holds"]), "nothing held now")
	assert.Equal(t, int64(1), count(m["relock.lost"], attribute.String("relock.kind", "fenced"), attribute.String("relock.reason", "gone")))
	assert.Equal(t, int64(1), count(m["relock.lost"]), "the lease that ended is not counted lost")
	assert.Equal(t, int64(1), count(m["relock.lease.ended"], kind))
	assert.Equal(t, int64(1), count(m["relock.stalled"], kind))
	assert.Equal(t, int64(1), count(m["relock.renewal.failures"]), "the round that found it gone")
	assert.GreaterOrEqual(t, count(m["relock.renewal.duration"]), int64(1))
	for _, d := range m["relock.acquire.duration"].(metricdata.Histogram[float64]).DataPoints {
		_, named := d.Attributes.Value("relock.name")
		assert.False(t, named, "no names unless asked for")
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	require.Len(t, byName["relock.acquire"], 5)
	require.Len(t, byName["relock.hold"], 4)
	require.Len(t, byName["relock.release"], 2, "the job's, and the stalled hold's give-back")
	job := byName["job"][0].SpanContext()
	first := byName["relock.acquire"][0]
	assert.Equal(t, job.SpanID(), first.Parent().SpanID(), "the acquire span is the job's child")
	hold := byName["relock.hold"][0]
	assert.Equal(t, job.SpanID(), hold.Parent().SpanID(), "so is the hold's")
	assert.Equal(t, hold.SpanContext().SpanID(), byName["relock.release"][0].Parent().SpanID(), "the release is the hold's child")
	assert.False(t, hold.StartTime().Before(first.StartTime()), "the hold starts when its acquire was sent")
	assert.Equal(t, "Error", byName["relock.hold"][1].Status().Code.String(), "the lost hold")
	assert.Equal(t, "Unset", byName["relock.hold"][2].Status().Code.String(), "the lease that ended")
	assert.Equal(t, "Error", byName["relock.hold"][3].Status().Code.String(), "the stalled hold")
	assert.Equal(t, byName["relock.hold"][3].SpanContext().SpanID(), byName["relock.release"][1].Parent().SpanID(),
		"the give-back is the stalled hold's release")
}

func TestHooksLockNames(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(meters), relockotel.WithLockNames())
	require.NoError(t, err)
	locks, err := reentrant.New(srv.Client(), reentrant.Options{Hooks: hooks})
	require.NoError(t, err)
	defer locks.Close()
	require.NoError(t, locks.Do(context.Background(), "named", func(context.Context) error { return nil }))
	m := collect(t, reader)
	assert.Equal(t, int64(1), count(m["relock.acquire.duration"], attribute.String("relock.name", "named")))

	_, err = relockotel.NewHooks(relockotel.WithMeterProvider(nil))
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

// A priority lock's acquires carry their priority.
func TestHooksPriority(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	locks, err := reentrant.New(srv.Client(), reentrant.Options{Hooks: hooks})
	require.NoError(t, err)
	defer locks.Close()
	mu := locks.PriorityLock("urgent")
	held, err := mu.Lock(context.Background(), reentrant.Priority(7))
	require.NoError(t, err)
	require.NoError(t, mu.Unlock(held))
	m := collect(t, reader)
	assert.Equal(t, int64(1), count(m["relock.acquire.duration"], attribute.String("relock.kind", "priority"), attribute.Int("relock.priority", 7)))
}

// A wait given up on a deadlock is counted, by the cycle's length.
func TestHooksDeadlock(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	locks, err := reentrant.New(srv.Client(), reentrant.Options{Hooks: hooks, DeadlockTimeout: time.Minute})
	require.NoError(t, err)
	defer locks.Close()
	rw := locks.ReadWriteLock("rw")
	held, err := rw.ReadLock().Lock(context.Background())
	require.NoError(t, err)
	_, err = rw.WriteLock().Lock(held) // waits for itself
	require.ErrorIs(t, err, reentrant.ErrDeadlock)
	require.NoError(t, rw.ReadLock().Unlock(held))
	m := collect(t, reader)
	assert.Equal(t, int64(1), count(m["relock.deadlocks"], attribute.Int("relock.cycle.length", 1)))
}

// TestElectionHooks: relock.election.leading is 1 while leading, by name
// with WithLockNames, and relock.election.changes counts each event.
func TestElectionHooks(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	hooks, err := relockotel.NewElectionHooks(relockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), relockotel.WithLockNames())
	require.NoError(t, err)
	rdb := srv.Client()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	defer locks.Close()
	e := election.New(locks, "scheduler", election.Options{Hooks: hooks})
	ctx := context.Background()
	leading, _, err := e.Campaign(ctx, "me")
	require.NoError(t, err)
	name := attribute.String("relock.name", "scheduler")
	assert.Equal(t, int64(1), count(collect(t, reader)["relock.election.leading"], name))
	require.NoError(t, e.Resign(leading))
	m := collect(t, reader)
	assert.Equal(t, int64(0), count(m["relock.election.leading"], name))
	assert.Equal(t, int64(1), count(m["relock.election.changes"], name, attribute.String("relock.election.event", "elected")))
	assert.Equal(t, int64(1), count(m["relock.election.changes"], name, attribute.String("relock.election.event", "resigned")))
}

// TestHoldAndContentionMetrics: hold durations by outcome, contended
// acquires, waiters in progress, error.type on failures, renewal lag and
// late renewals, with names mapped to their template.
func TestHoldAndContentionMetrics(t *testing.T) {
	srv := redistest.Start(t)
	reader := sdkmetric.NewManualReader()
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		relockotel.WithNameTemplate(func(name string) string {
			prefix, _, _ := strings.Cut(name, ":")
			return prefix + ":{id}"
		}))
	require.NoError(t, err)
	const wd = 1500 * time.Millisecond
	locks, err := reentrant.New(srv.Client(), reentrant.Options{Hooks: hooks, WatchdogTimeout: wd})
	require.NoError(t, err)
	defer locks.Close()
	other, err := reentrant.New(srv.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer other.Close()
	ctx := context.Background()

	taken, err := other.Lock("order:1").Lock(ctx)
	require.NoError(t, err)
	_, ok, err := locks.Lock("order:1").TryLock(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	got := make(chan context.Context, 1)
	go func() {
		held, err := locks.Lock("order:1").Lock(ctx) // waits for the release
		assert.NoError(t, err)
		got <- held
	}()
	require.Eventually(t, func() bool { // its first attempt found the lock taken
		n, err := srv.Do("EXISTS", "relock_waiters:{order:1}").AsInt64()
		return err == nil && n == 1
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, other.Lock("order:1").Unlock(taken))
	held := redistest.Recv(t, got)
	require.NoError(t, locks.Lock("order:1").Unlock(held))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = locks.Lock("order:2").Lock(cancelled)
	require.ErrorIs(t, err, context.Canceled)

	lost, err := locks.Lock("order:3").Lock(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count(collect(t, reader)["relock.renewal.lag"]) >= 2 }, 10*wd, 10*time.Millisecond,
		"renewal rounds confirmed")
	require.NoError(t, srv.Do("CLIENT", "PAUSE", "3000", "WRITE").Error())
	defer srv.Do("CLIENT", "UNPAUSE")
	select {
	case <-lost.Done():
	case <-time.After(3 * wd):
		t.Fatal("not lost while Redis's writes were paused")
	}
	srv.Do("CLIENT", "UNPAUSE")

	m := collect(t, reader)
	name := attribute.String("relock.name", "order:{id}")
	kind := attribute.String("relock.kind", "lock")
	assert.Equal(t, int64(1), count(m["relock.hold.duration"], name, kind, attribute.String("relock.outcome", "released")))
	assert.Equal(t, int64(1), count(m["relock.hold.duration"], name, attribute.String("relock.outcome", "lost"), attribute.String("error.type", "lost")))
	assert.Equal(t, int64(1), count(m["relock.acquire.contended"], name, attribute.String("relock.outcome", "not_acquired")))
	assert.Equal(t, int64(1), count(m["relock.acquire.contended"], name, attribute.String("relock.outcome", "acquired")), "the wait for the release")
	assert.Equal(t, int64(1), count(m["relock.acquire.duration"], name, attribute.String("error.type", "canceled")))
	assert.Equal(t, int64(0), count(m["relock.waiting"]), "no call in progress")
	assert.Equal(t, int64(1), count(m["relock.renewal.late"], name, kind), "told late before the loss")
	for _, p := range m["relock.renewal.lag"].(metricdata.Histogram[float64]).DataPoints {
		assert.Equal(t, relockotel.LagBuckets, p.Bounds)
		least, ok := p.Min.Value()
		require.True(t, ok)
		assert.Less(t, least, 1/6.0, "a quiet round is early enough")
	}
}
