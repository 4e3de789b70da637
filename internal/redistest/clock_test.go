package redistest

import (
	"strconv"
	"testing"
	"time"
)

// A shifted clock moves the server's TIME and its expiries, forward and
// back, across a restart too; the test's own clock stays.
func TestShiftClock(t *testing.T) {
	s := StartClocked(t)
	serverNow := func() time.Time {
		v, err := s.Do("TIME").AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		sec, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(sec, 0)
	}
	if d := serverNow().Sub(time.Now()); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("unshifted, the server's clock is %v off", d)
	}
	s.Do("SET", "k", "v", "PX", "60000")
	s.ShiftClock(time.Hour)
	if d := serverNow().Sub(time.Now()); d < time.Hour-2*time.Second || d > time.Hour+2*time.Second {
		t.Fatalf("an hour ahead, the server's clock is %v off", d)
	}
	if n, _ := s.Do("EXISTS", "k").AsInt64(); n != 0 {
		t.Fatal("a key with a minute left outlived a clock an hour ahead")
	}
	s.Do("SET", "k", "v", "PX", "60000")
	s.ShiftClock(-time.Hour)
	if ms, _ := s.Do("PTTL", "k").AsInt64(); ms < int64(2*time.Hour/time.Millisecond)-5000 {
		t.Fatalf("a clock stepped back two hours leaves a minute's key %d ms", ms)
	}
	s.Restart()
	if d := serverNow().Sub(time.Now()); d > -time.Hour+2*time.Second || d < -time.Hour-2*time.Second {
		t.Fatalf("restarted, an hour behind, the server's clock is %v off", d)
	}
}
