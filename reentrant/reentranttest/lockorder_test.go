package reentranttest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/reentranttest"
)

// errorsOf records what LockOrder reports instead of failing the test.
type errorsOf struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *errorsOf) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *errorsOf) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

// takeBoth takes first, then second as first's owner, and gives both back.
func takeBoth(t *testing.T, locks *reentrant.Client, first, second string) {
	ctx := context.Background()
	a, err := locks.Lock(first).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := locks.Lock(second).Lock(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := locks.Lock(second).Unlock(b); err != nil {
		t.Fatal(err)
	}
	if err := locks.Lock(first).Unlock(a); err != nil {
		t.Fatal(err)
	}
}

// Two owners take x and y in opposite orders, one after the other: no
// deadlock happened, and LockOrder reports the order all the same. The same
// order twice, re-entry, and locks taken one at a time are not reported.
func TestLockOrder(t *testing.T) {
	rec := &errorsOf{TB: t}
	locks, _ := reentranttest.New(t, reentrant.Options{Hooks: reentranttest.LockOrder(rec)})
	takeBoth(t, locks, "x", "y")
	takeBoth(t, locks, "x", "y")
	takeBoth(t, locks, "x", "x")
	takeBoth(t, locks, "z", "z")
	if errs := rec.reported(); len(errs) != 0 {
		t.Fatalf("reported with one order: %v", errs)
	}
	takeBoth(t, locks, "y", "x")
	if errs := rec.reported(); len(errs) != 1 {
		t.Fatalf("want one report of opposite orders, got %v", errs)
	}
	// Both takings by the line that asked for them (takeBoth's second
	// Lock), not by the hook's own line, and by owner.
	report := rec.reported()[0]
	if strings.Count(report, "lockorder_test.go:") != 2 || strings.Contains(report, "reentranttest.go") || strings.Count(report, "owner ") != 2 {
		t.Errorf("the report names each taking's line and owner: %s", report)
	}
	t.Log(report)
}
