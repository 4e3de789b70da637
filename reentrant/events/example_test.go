package events_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/events"
)

// A program told who takes and gives back the lock "nightly-report", and
// when a holder dies with it. It needs a Redis that publishes keyspace
// notifications (notify-keyspace-events KEA), so it is not run here.
func Example() {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"localhost:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	evs, err := events.Watch(ctx, locks, "nightly-report", events.Options{})
	if err != nil {
		log.Fatal(err) // events.ErrNotificationsOff says which flags to set
	}
	for ev := range evs {
		switch ev.Kind {
		case events.Acquired, events.Released:
			fmt.Println(ev.At.Format("15:04:05.000"), ev.Kind, "by", ev.Holders[0].Owner)
		case events.Expired:
			fmt.Println(ev.At.Format("15:04:05.000"), "expired with holders", ev.Holders)
		default:
			fmt.Println(ev.At.Format("15:04:05.000"), ev.Kind, ev.Err)
		}
	}
}

// A server that will not answer CONFIG GET (here an embedded Redis; in
// production an ACL or a managed Redis) cannot be checked for
// notifications: Watch says so rather than watch a silent channel.
// events.Unchecked() watches anyway, for a server known to publish them.
func ExampleWatch_unchecked() {
	m, err := miniredis.Run()
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
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	_, err = events.Watch(context.Background(), locks, "nightly-report", events.Options{})
	fmt.Println(errors.Is(err, events.ErrNotificationsUnknown))
	// Output: true
}
