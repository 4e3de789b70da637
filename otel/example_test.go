package relockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	relockotel "github.com/relock-go/relock/otel"
	"github.com/relock-go/relock/reentrant"
)

func ExampleNewHooks() {
	m, err := miniredis.Run() // an embedded Redis; a program connects to its own
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	reader := sdkmetric.NewManualReader() // a program would export instead
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		log.Fatal(err)
	}
	locks, err := reentrant.New(rdb, reentrant.Options{Hooks: hooks})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	for range 3 {
		if err := locks.Do(context.Background(), "nightly-report", func(context.Context) error { return nil }); err != nil {
			log.Fatal(err)
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if h, ok := metric.Data.(metricdata.Histogram[float64]); ok && metric.Name == "relock.acquire.duration" {
				fmt.Println(metric.Name, "count:", h.DataPoints[0].Count)
			}
		}
	}
	// Output: relock.acquire.duration count: 3
}
