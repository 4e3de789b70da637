package relockotel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/relock-go/relock/internal/redistest"
	relockotel "github.com/relock-go/relock/otel"
	"github.com/relock-go/relock/reentrant"
)

// discard is a span exporter that drops what it is given: the spans are
// made, recorded and batched as in production, and go nowhere.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkParallelPairsCost: Lock+Unlock pairs from 64 goroutines on one
// client, each on a lock of its own, without hooks ("hooks=none") and with
// relockotel's on the OpenTelemetry SDK: "hooks=metrics", every metric
// into a manual reader and no tracer; "hooks=sdk-sampled", with one trace
// in a hundred sampled as well; "hooks=sdk", every span sampled, all
// batched to an exporter that drops them. docs/operations.md gives the
// command that alternates them.
func BenchmarkParallelPairsCost(b *testing.B) {
	b.Run("hooks=none", func(b *testing.B) { benchmarkPairs(b, reentrant.Hooks{}) })
	b.Run("hooks=sdk", func(b *testing.B) { benchmarkPairs(b, sdkHooks(b)) })
	b.Run("hooks=sdk-sampled", func(b *testing.B) {
		benchmarkPairs(b, sdkHooks(b, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)))))
	})
	b.Run("hooks=metrics", func(b *testing.B) {
		meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = meters.Shutdown(context.Background()) })
		hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(meters), relockotel.WithTracerProvider(noop.NewTracerProvider()))
		if err != nil {
			b.Fatal(err)
		}
		benchmarkPairs(b, hooks)
	})
}

// sdkHooks returns relockotel's hooks on the SDK: metrics into a manual
// reader, spans batched to an exporter that drops them, sampled as opts
// say (every one by default).
func sdkHooks(b *testing.B, opts ...sdktrace.TracerProviderOption) reentrant.Hooks {
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tracers := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithBatcher(discard{})}, opts...)...)
	b.Cleanup(func() {
		_ = tracers.Shutdown(context.Background())
		_ = meters.Shutdown(context.Background())
	})
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(meters), relockotel.WithTracerProvider(tracers))
	if err != nil {
		b.Fatal(err)
	}
	return hooks
}

func benchmarkPairs(b *testing.B, hooks reentrant.Hooks) {
	s := redistest.Start(b)
	c, err := reentrant.New(s.Client(), reentrant.Options{Hooks: hooks})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu := c.Lock(fmt.Sprintf("cost:%d", n.Add(1)))
		ctx := context.Background()
		for pb.Next() {
			held, err := mu.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := mu.Unlock(held); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
