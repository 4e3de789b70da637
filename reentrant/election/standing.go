package election

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// candidacy is one Campaign's standing: its registration, a plain lock
// held by the Campaign's owner and kept by the watchdog, and its entry in
// the roll. When the registration is lost (Redis out of reach past its
// lease) it stands again once Redis answers, until it leaves.
type candidacy struct {
	rt    addon.Runtime
	key   string // the election's lock key
	name  string // the election's name
	fail  func(op string, err error) error
	owner string
	regID string // the registration's owner, new for each Campaign
	value string
	reg   *reentrant.Lock
	ctx   context.Context // carries the owner
	mu    sync.Mutex
	held  context.Context // the registration's held context
	left  bool
	stop  chan struct{}
	once  sync.Once // leave's: a second caller waits for the first
}

// stand registers owner as a candidate with value in the election whose
// lock is key, under the registration reg, an owner of this Campaign's
// own; fail words its errors.
func stand(ctx context.Context, rt addon.Runtime, key, name string, fail func(string, error) error, owner, reg reentrant.Owner, value string) (*candidacy, error) {
	lock, _ := rt.LockAt(scripts.CandidateKey(key, reg.String())).(*reentrant.Lock)
	c := &candidacy{rt: rt, key: key, name: name, fail: fail, owner: owner.String(), regID: reg.String(), value: value, reg: lock, ctx: reentrant.WithOwner(context.WithoutCancel(ctx), reg), stop: make(chan struct{})}
	if err := c.register(ctx); err != nil {
		return nil, err
	}
	rt.Go(c.keep)
	return c, nil
}

// register takes the registration and writes the roll's entry.
func (c *candidacy) register(ctx context.Context) error {
	held, ok, err := c.reg.TryLock(c.ctx)
	if err == nil && !ok {
		err = fmt.Errorf("relock: election %q: the registration %s is held by another owner", c.name, c.regID)
	}
	if err != nil {
		return err
	}
	stood, err := scripts.ElectionStand(context.WithoutCancel(ctx), c.rt.Conn(), c.key, c.owner, c.regID, c.value, false, c.rt.Publish)
	if err == nil && !stood {
		err = fmt.Errorf("relock: election %q: %w: the candidate's registration was lost as it stood", c.name, reentrant.ErrLockLost)
	}
	if err != nil {
		_ = c.reg.Unlock(held)
		return c.fail("stand", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.left {
		_ = c.reg.Unlock(held)
		return nil
	}
	c.held = held
	return nil
}

// keep stands again after the registration is lost, every RepollInterval
// until it stands or leaves.
func (c *candidacy) keep() {
	for {
		c.mu.Lock()
		held := c.held
		c.mu.Unlock()
		select {
		case <-c.stop:
			return
		case <-c.rt.Closing.Done():
			return
		case <-held.Done():
		}
		for {
			select {
			case <-c.stop:
				return
			case <-c.rt.Closing.Done():
				return
			case <-time.After(c.rt.Repoll):
			}
			if c.register(c.rt.Closing) == nil {
				break
			}
		}
	}
}

// leave takes the candidate off the roll and gives its registration
// back, once: a second call returns when the first is done, so a Run that
// campaigns again after a loss stands after the last standing left.
func (c *candidacy) leave() {
	c.once.Do(func() {
		c.mu.Lock()
		c.left = true
		held := c.held
		close(c.stop)
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), leaveWindow)
		defer cancel()
		if _, err := scripts.ElectionStand(ctx, c.rt.Conn(), c.key, c.owner, c.regID, "", true, c.rt.Publish); err != nil {
			c.rt.Logger.Debug("relock: a candidate could not leave the roll; it leaves the list when its registration is given back", "election", c.name, "error", err)
		}
		if held != nil {
			_ = c.reg.Unlock(held)
		}
	})
}

// leaveWindow bounds how long leaving the roll may take.
const leaveWindow = 5 * time.Second
