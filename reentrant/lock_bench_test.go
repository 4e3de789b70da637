package reentrant_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// BenchmarkLockUnlock: one goroutine takes and gives back one lock. With
// a ctx that can end, as a request's can, each attempt runs on one of the
// client's workers, so that one cut short is heard out (see attempt.Once).
//
//	go test -run '^$' -bench LockUnlock -benchmem ./reentrant
func BenchmarkLockUnlock(b *testing.B) {
	b.Run("ctx=background", func(b *testing.B) { benchmarkLockUnlock(b, bg()) })
	b.Run("ctx=cancellable", func(b *testing.B) {
		ctx, cancel := context.WithCancel(bg())
		defer cancel()
		benchmarkLockUnlock(b, ctx)
	})
	b.Run("ctx=request", func(b *testing.B) { // cancellable, with a deadline
		ctx, cancel := context.WithTimeout(bg(), time.Hour)
		defer cancel()
		benchmarkLockUnlock(b, ctx)
	})
}

func benchmarkLockUnlock(b *testing.B, ctx context.Context) {
	s := redistest.Start(b)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	mu := c.Lock("bench")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		held, err := mu.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := mu.Unlock(held); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel: 64 goroutines on one client, each with its
// own lock, with a ctx that cannot end and with one that can, as a
// request's can.
func BenchmarkLockUnlockParallel(b *testing.B) {
	b.Run("ctx=background", func(b *testing.B) { benchmarkLockUnlockParallel(b, bg) })
	b.Run("ctx=cancellable", func(b *testing.B) {
		benchmarkLockUnlockParallel(b, func() context.Context {
			ctx, cancel := context.WithCancel(bg())
			b.Cleanup(cancel)
			return ctx
		})
	})
}

func benchmarkLockUnlockParallel(b *testing.B, newCtx func() context.Context) {
	s := redistest.Start(b)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu := c.Lock(fmt.Sprintf("bench:%d", n.Add(1)))
		ctx := newCtx()
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
}
