// Package relockotel reports relock's locks to OpenTelemetry: metrics for
// acquire waits, holds in progress, lost locks and watchdog renewals, and
// spans for each acquire, hold and release.
//
// It is its own module, so programs that do not use OpenTelemetry do not
// pull it in. Give the Hooks it returns to the relock client:
//
//	func newLocks(rdb rueidis.Client, mp metric.MeterProvider, tp trace.TracerProvider) (*reentrant.Client, error) {
//		hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(tp))
//		if err != nil {
//			return nil, err
//		}
//		return reentrant.New(rdb, reentrant.Options{Hooks: hooks})
//	}
//
// NewElectionHooks does the same for package election's leaderships
// (election.Options.Hooks).
//
// Lock names are not recorded unless WithLockNames is given: a service
// that locks one name per order or user would give every name its own
// time series.
package relockotel
