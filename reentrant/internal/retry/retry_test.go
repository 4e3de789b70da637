package retry

import (
	"errors"
	"testing"
	"time"
)

func TestUntilPausesDoublingUpToMax(t *testing.T) {
	var pauses []time.Duration
	pause := func(d time.Duration) error { pauses = append(pauses, d); return nil }
	tries := 0
	err := Until(Backoff{First: 10 * time.Millisecond, Max: 50 * time.Millisecond}, pause, func(n int) Outcome {
		if n != tries {
			t.Fatalf("try numbered %d, want %d", n, tries)
		}
		tries++
		return doneAt(n, 4)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10, 20, 40, 50}
	if tries != 5 || len(pauses) != len(want) {
		t.Fatalf("%d tries, pauses %v; want 5 tries, 4 pauses", tries, pauses)
	}
	for i, w := range want {
		if pauses[i] != w*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", pauses, want)
		}
	}
}

func TestUntilPausesFirstWhenAsked(t *testing.T) {
	var pauses []time.Duration
	pause := func(d time.Duration) error { pauses = append(pauses, d); return nil }
	_ = Until(Backoff{First: 20 * time.Millisecond, Max: time.Second, PauseFirst: true}, pause, func(int) Outcome { return Done })
	if len(pauses) != 1 || pauses[0] != 20*time.Millisecond {
		t.Fatalf("pauses %v, want one of 20ms before the only try", pauses)
	}
}

func TestUntilStopsWhenAPauseFails(t *testing.T) {
	stop := errors.New("ctx ended")
	tries := 0
	err := Until(Backoff{First: time.Millisecond, Max: time.Millisecond}, func(time.Duration) error { return stop }, func(int) Outcome {
		tries++
		return Again
	})
	if !errors.Is(err, stop) || tries != 1 {
		t.Fatalf("err %v after %d tries, want the pause's error after 1", err, tries)
	}
}

func doneAt(n, last int) Outcome {
	if n == last {
		return Done
	}
	return Again
}

// A try the server refused (it is up) is followed by a pause of at most
// UpPause, and the pauses grow from there while the server is not heard.
func TestUntilPausesLittleAfterARefusal(t *testing.T) {
	var pauses []time.Duration
	pause := func(d time.Duration) error { pauses = append(pauses, d); return nil }
	outcomes := []Outcome{Again, Again, Again, Again, Refused, Refused, Again, Again, Done}
	_ = Until(Backoff{First: 20 * time.Millisecond, Max: time.Second}, pause, func(n int) Outcome { return outcomes[n] })
	want := []time.Duration{20, 40, 80, 160, 100, 100, 200, 400}
	if len(pauses) != len(want) {
		t.Fatalf("pauses %v, want %v ms", pauses, want)
	}
	for i, w := range want {
		if pauses[i] != w*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", pauses, want)
		}
	}
}

func TestJitteredStaysInTheUpperHalf(t *testing.T) {
	for range 1000 {
		if d := Jittered(100); d < 50 || d > 100 {
			t.Fatalf("Jittered(100) = %d, want 50..100", d)
		}
	}
}
