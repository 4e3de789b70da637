package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The floors: a "pair" of two no-op scripts (return 1), one for the
// acquire and one for the release, through each client stack the peers
// use. No lock can cost its client less than two script calls per pair,
// so each library's figure reads as a multiple of its stack's floor, in
// the same run. A floor excludes nothing: it runs scenarios 1 and 2 only.
var (
	noopRueidis = rueidis.NewLuaScript("return 1")
	noopGoredis = goredis.NewScript("return 1")
)

type rueidisFloor struct{ rdb rueidis.Client }

func newRueidisFloor(addr string) (locker, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return rueidisFloor{rdb}, nil
}

func (f rueidisFloor) lock(ctx context.Context, _ string) (func() error, error) {
	if err := noopRueidis.Exec(ctx, f.rdb, nil, nil).Error(); err != nil {
		return nil, err
	}
	return func() error { return noopRueidis.Exec(context.Background(), f.rdb, nil, nil).Error() }, nil
}

func (f rueidisFloor) close() { f.rdb.Close() }

type goredisFloor struct{ client *goredis.Client }

func newGoredisFloor(addr string) (locker, error) {
	return goredisFloor{goredis.NewClient(&goredis.Options{Addr: addr})}, nil
}

func (f goredisFloor) lock(ctx context.Context, _ string) (func() error, error) {
	if err := noopGoredis.Run(ctx, f.client, nil).Err(); err != nil {
		return nil, err
	}
	return func() error { return noopGoredis.Run(context.Background(), f.client, nil).Err() }, nil
}

func (f goredisFloor) close() { _ = f.client.Close() }
