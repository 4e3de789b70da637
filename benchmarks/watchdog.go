package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// keepAlive: 10,000 locks held by one client, and what keeping them alive
// costs while nothing else happens: Redis commands per second and the
// client's CPU per second, over the given window. Only libraries that renew
// on their own take part.
func keepAlive(l lib, s *server, locks int, window time.Duration) (result, error) {
	lk, err := l.connect(s.addr)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	unlocks := make([]func() error, locks)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < locks; i += 32 {
				u, err := lk.lock(ctx, fmt.Sprintf("bench:held:%d", i))
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				unlocks[i] = u
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	s.do("CONFIG", "RESETSTAT")
	cpu0 := cpuTime()
	time.Sleep(window)
	cpu := cpuTime() - cpu0
	_, all := s.commands()
	held, _ := s.do("DBSIZE").AsInt64()
	for _, u := range unlocks {
		u()
	}
	sec := window.Seconds()
	return result{
		"cmds/s":          float64(all) / sec,
		"client cpu ms/s": float64(cpu.Milliseconds()) / sec,
		"keys held":       float64(held),
	}, nil
}
