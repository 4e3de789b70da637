package reentranttest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/reentranttest"
)

// Fake time: inside a synctest bubble, an hour's lease ends at once, on the
// client and on the server alike.
func TestLeaseEndsInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		locks, m := reentranttest.New(t, reentrant.Options{})
		held, err := locks.Lock("job").Lock(context.Background(), reentrant.LeaseFor(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if !errors.Is(context.Cause(held), reentrant.ErrLeaseEnded) {
			t.Fatalf("cause %v", context.Cause(held))
		}
		if m.Exists("job") {
			t.Fatal("the key outlived its TTL")
		}
	})
}
