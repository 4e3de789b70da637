package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// wakeFloor measures the least a handoff by message can take on this
// machine, whatever the lock: one client runs a script that publishes,
// another client's subscriber hears it and wakes a goroutine that waits
// for it. It returns the p50 and p99 of samples runs, from the script's
// call to the wake. A waiter whose wait ends on a release's message (as
// relock's handed-on locks do) cannot be told sooner.
func wakeFloor(s *server, samples int) (p50, p99 time.Duration, err error) {
	opt := rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true}
	pub, err := rueidis.NewClient(opt)
	if err != nil {
		return 0, 0, err
	}
	defer pub.Close()
	sub, err := rueidis.NewClient(opt)
	if err != nil {
		return 0, 0, err
	}
	defer sub.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make(chan struct{}, 1)
	listening := make(chan error, 1)
	go func() {
		listening <- sub.Receive(ctx, sub.B().Subscribe().Channel("bench:wakefloor").Build(), func(rueidis.PubSubMessage) {
			select {
			case heard <- struct{}{}:
			default:
			}
		})
	}()
	// Subscribed once a message gets through.
	for ready := false; !ready; {
		if err := pub.Do(ctx, pub.B().Publish().Channel("bench:wakefloor").Message("ready").Build()).Error(); err != nil {
			return 0, 0, err
		}
		select {
		case <-heard:
			ready = true
		case err := <-listening:
			return 0, 0, fmt.Errorf("subscribe: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(20 * time.Millisecond) // a late "ready" would end a sample early
	select {
	case <-heard:
	default:
	}

	script := rueidis.NewLuaScript("redis.call('hset', KEYS[1], 'owner', 1) redis.call('del', KEYS[1]) return redis.call('publish', ARGV[1], '0')")
	woke := make(chan time.Time)
	lat := make([]time.Duration, 0, samples)
	for i := 0; i < samples; i++ {
		go func() { <-heard; woke <- time.Now() }() // the waiter
		t := time.Now()
		if err := script.Exec(ctx, pub, []string{"bench:wakefloor"}, []string{"bench:wakefloor"}).Error(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, (<-woke).Sub(t))
		time.Sleep(time.Millisecond) // as the forced handoff's hold
	}
	return percentile(lat, .5), percentile(lat, .99), nil
}
