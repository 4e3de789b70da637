package relockotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// eventKey says how a leadership changed: elected, lost, resigned.
const eventKey = attribute.Key("relock.election.event")

// NewElectionHooks returns election hooks (give them to election.New in
// election.Options.Hooks) that record:
//
//   - relock.election.leading: 1 while this process leads, else 0, by
//     relock.name with WithLockNames (else summed over elections: how many
//     this process leads);
//   - relock.election.changes: leaderships begun and ended here, by
//     relock.election.event (elected, lost, resigned).
//
// The term is not a metric's attribute: each would be a time series of
// its own. Of the options, WithMeterProvider and WithLockNames apply.
func NewElectionHooks(opts ...Option) (election.Hooks, error) {
	cfg := config{meters: otel.GetMeterProvider(), tracers: otel.GetTracerProvider()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.meters == nil {
		return election.Hooks{}, fmt.Errorf("relockotel: %w: nil meter provider", reentrant.ErrInvalidArgument)
	}
	meter := cfg.meters.Meter(scope, metric.WithInstrumentationVersion(version()))
	leading, err1 := meter.Int64UpDownCounter("relock.election.leading",
		metric.WithDescription("Elections this process leads now (1 per election name with relock.name)."))
	changes, err2 := meter.Int64Counter("relock.election.changes",
		metric.WithDescription("Leaderships begun and ended in this process, by relock.election.event."))
	if err := errors.Join(err1, err2); err != nil {
		return election.Hooks{}, fmt.Errorf("relockotel: %w", err)
	}
	attrs := func(name string, event string) (metric.AddOption, metric.AddOption) {
		set := []attribute.KeyValue{}
		if cfg.names {
			set = append(set, nameKey.String(name))
		}
		return metric.WithAttributes(set...), metric.WithAttributes(append(set, eventKey.String(event))...)
	}
	ended := func(name, event string) {
		named, evented := attrs(name, event)
		leading.Add(context.Background(), -1, named)
		changes.Add(context.Background(), 1, evented)
	}
	return election.Hooks{
		Elected: func(name string, _ election.Term) {
			named, evented := attrs(name, "elected")
			leading.Add(context.Background(), 1, named)
			changes.Add(context.Background(), 1, evented)
		},
		Lost:     func(name string, _ election.Term, _ error) { ended(name, "lost") },
		Resigned: func(name string, _ election.Term) { ended(name, "resigned") },
	}, nil
}
