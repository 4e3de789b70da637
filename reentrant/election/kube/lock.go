// Package kube elects Kubernetes controllers on relock, in two ways.
//
// ResourceLock is client-go's resourcelock.Interface on Redis: give it to
// leaderelection.LeaderElectionConfig.Lock, or to controller-runtime's
// manager.Options.LeaderElectionResourceLockInterface, and the elector runs
// unchanged, on Redis instead of a Lease in the API server. Its timings
// stay client-go's (a crashed leader is succeeded after LeaseDuration and
// a retry), since that elector trusts only its own clock; what it gains is
// a fenced term for each leadership (Term), which a store can use to turn
// away a leader that lost its lease while paused.
//
// Run is relock's own election for a controller: it runs a manager (or any
// func) only while leading, cancels it the moment leadership may be lost,
// and gives its code the term. A resigned leader is succeeded within
// milliseconds, a crashed one within a watchdog timeout.
//
// The package is a Go module of its own, so that client-go never enters
// relock's main module. It runs its scripts through relock's internal
// add-on seam (reentrant/internal/addon), which is no API: use it with
// the relock release it was released with, in lockstep.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/rueidis"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// ResourceLock is a leader election record in Redis for client-go's
// elector: a resourcelock.Interface. Get reads the record (a NotFound
// error when there is none); Create writes the first; Update writes over
// the record this lock last read or wrote, and fails with a Conflict when
// another wrote since, as an update of a Lease with a stale resourceVersion
// does. Each is one script; nothing is retried. Errors that are not the
// API's (Redis unreachable, say) are returned as they are: the elector
// counts them as a failed try, and a leader that cannot renew within its
// RenewDeadline stops leading.
//
// Each leadership has a fenced term: a write that names a new holder (or
// the same holder after the elector counted a transition) draws one from
// the fenced lock's counter of the same name, so terms only grow. Get
// reports it as the record's LeaderTransitions; Term returns it. The
// record's keys are relock_lease:{name} and the counter
// redisson_lock_token:{name}; neither expires.
//
// Its methods are safe for concurrent use; one elector uses one lock.
type ResourceLock struct {
	rt       addon.Runtime
	name     string // as given
	key      string // name in Redis (Options.NameMapper)
	identity string
	events   resourcelock.EventRecorder
	err      error // from New: every call returns it

	mu   sync.Mutex
	seen int64 // the version last read or written; 0: none yet
	term election.Term
}

// Resource is the group and resource the lock's API errors name.
var Resource = schema.GroupResource{Group: "relock", Resource: "leaserecords"}

// NewResourceLock returns the resource lock of the election name on c, for
// the candidate cfg.Identity; cfg.EventRecorder, if set, records the
// elector's events ("became leader", "stopped leading") against a Lease
// named name, as client-go's LeaseLock does. It does nothing on Redis. A
// nil c, an empty name or an empty identity gives a lock whose every call
// fails with reentrant.ErrInvalidArgument.
func NewResourceLock(c *reentrant.Client, name string, cfg resourcelock.ResourceLockConfig) *ResourceLock {
	rt, ok := addon.Of(c)
	l := &ResourceLock{rt: rt, name: name, identity: cfg.Identity, events: cfg.EventRecorder}
	switch {
	case !ok:
		l.err = fmt.Errorf("relock: resource lock %q: %w: not a Client made by reentrant.New", name, reentrant.ErrInvalidArgument)
	case name == "":
		l.err = fmt.Errorf("relock: resource lock: %w: an empty name", reentrant.ErrInvalidArgument)
	case cfg.Identity == "":
		l.err = fmt.Errorf("relock: resource lock %q: %w: an empty identity", name, reentrant.ErrInvalidArgument)
	default:
		l.key = rt.Key(name)
	}
	return l
}

// Get returns the record, and its JSON with its version (relockVersion),
// which the elector compares to tell a change; a NotFound error when there
// is none.
func (l *ResourceLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := l.check(ctx); err != nil {
		return nil, nil, err
	}
	got, found, err := scripts.LeaseRecordGet(ctx, l.rt.Conn(), l.key)
	if err != nil {
		return nil, nil, l.fail("get", err)
	}
	if !found {
		return nil, nil, apierrors.NewNotFound(Resource, l.name)
	}
	var rec resourcelock.LeaderElectionRecord
	if err := json.Unmarshal([]byte(got.Record), &rec); err != nil {
		return nil, nil, fmt.Errorf("relock: resource lock %q: the record is not an election record: %w", l.name, err)
	}
	rec.LeaderTransitions = int(got.Term)
	// The elector compares raw records to tell when it last saw the record
	// change, and counts a lease from then. The record's times are in whole
	// seconds, so two renewals in one second would look the same, and a
	// crashed leader's lease be counted from up to a second before its last
	// renewal: with the version beside it, every write is a change.
	raw, err := json.Marshal(versioned{rec, got.Version})
	if err != nil {
		return nil, nil, err
	}
	l.saw(got)
	return &rec, raw, nil
}

// versioned is the raw record Get returns: the record and its version.
type versioned struct {
	resourcelock.LeaderElectionRecord
	Version int64 `json:"relockVersion"`
}

// Create writes the first record: an AlreadyExists error if there is one.
// A record with a LeaseDurationSeconds below 1 is refused with
// reentrant.ErrInvalidArgument, as Update refuses it.
func (l *ResourceLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.checkWrite(ctx, ler); err != nil {
		return err
	}
	text, err := json.Marshal(ler)
	if err != nil {
		return err
	}
	got, outcome, err := scripts.LeaseRecordCreate(ctx, l.rt.Conn(), l.key, string(text), ler.HolderIdentity)
	switch {
	case err != nil && outcome == scripts.LeaseWritten:
		l.saw(got) // written, replicas not confirmed: say so, but know it
		return l.fail("create", err)
	case err != nil:
		return l.fail("create", err)
	case outcome == scripts.LeaseExists:
		return apierrors.NewAlreadyExists(Resource, l.name)
	}
	l.saw(got)
	return nil
}

// Update writes ler over the record this lock last read or wrote: a
// Conflict error if another wrote since, a NotFound if the record is gone.
func (l *ResourceLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.checkWrite(ctx, ler); err != nil {
		return err
	}
	l.mu.Lock()
	seen := l.seen
	l.mu.Unlock()
	if seen == 0 {
		return fmt.Errorf("relock: resource lock %q: update before a get or create", l.name)
	}
	text, err := json.Marshal(ler)
	if err != nil {
		return err
	}
	got, outcome, err := scripts.LeaseRecordUpdate(ctx, l.rt.Conn(), l.key, seen, string(text), ler.HolderIdentity, int64(ler.LeaderTransitions))
	switch {
	case err != nil && outcome == scripts.LeaseWritten:
		l.saw(got)
		return l.fail("update", err)
	case err != nil:
		return l.fail("update", err)
	case outcome == scripts.LeaseConflict:
		return apierrors.NewConflict(Resource, l.name, errors.New("the record was written by another since it was read"))
	case outcome == scripts.LeaseMissing:
		return apierrors.NewNotFound(Resource, l.name)
	}
	l.saw(got)
	return nil
}

// RecordEvent records an event of the elector's, when the lock was given
// an EventRecorder.
func (l *ResourceLock) RecordEvent(s string) {
	if l.events == nil {
		return
	}
	subject := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name}}
	subject.Kind = "Lease"
	l.events.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%v %v", l.identity, s)
}

// Identity returns the candidate's identity ("" for a nil lock).
func (l *ResourceLock) Identity() string {
	if l == nil {
		return ""
	}
	return l.identity
}

// Describe names the lock in the elector's logs.
func (l *ResourceLock) Describe() string {
	if l == nil {
		return "relock/<nil>"
	}
	return "relock/" + l.name
}

// Term returns the fenced term of the record this lock last read or
// wrote: in the elector's OnStartedLeading, the term of the leadership
// that began. 0 before any read or write, and for a nil lock.
func (l *ResourceLock) Term() election.Term {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term
}

func (l *ResourceLock) saw(got scripts.LeaseRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen, l.term = got.Version, election.Term(got.Term)
}

func (l *ResourceLock) check(ctx context.Context) error {
	switch {
	case l == nil:
		return fmt.Errorf("relock: %w: a nil ResourceLock", reentrant.ErrInvalidArgument)
	case l.err != nil:
		return l.err
	case ctx == nil:
		return fmt.Errorf("relock: resource lock %q: %w: a nil context", l.name, reentrant.ErrInvalidArgument)
	case l.rt.Closing.Err() != nil:
		return fmt.Errorf("relock: resource lock %q: %w", l.name, reentrant.ErrClosed)
	}
	return nil
}

// checkWrite is check for a write of ler: a lease of less than a second
// would make every candidate's elector take the lease at once.
func (l *ResourceLock) checkWrite(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if ler.LeaseDurationSeconds < 1 {
		return fmt.Errorf("relock: resource lock %q: %w: LeaseDurationSeconds %d (at least 1)", l.name, reentrant.ErrInvalidArgument, ler.LeaseDurationSeconds)
	}
	return nil
}

// fail names the lock and what failed in err, and tells relock's errors
// by their sentinels: a key of another type, a right the Redis user
// lacks, a closed client.
func (l *ResourceLock) fail(op string, err error) error {
	switch {
	case scripts.IsWrongType(err):
		return fmt.Errorf("relock: resource lock %q: %s: %w (%w)", l.name, op, reentrant.ErrWrongType, scripts.Tidy(err))
	case scripts.IsNoPermission(err):
		return fmt.Errorf("relock: resource lock %q: %s: %w: a resource lock needs an election's rights, +hmget beside a lock's (docs/deployment.md) (%w)", l.name, op, reentrant.ErrNoPermission, scripts.Tidy(err))
	case errors.Is(err, rueidis.ErrClosing):
		return fmt.Errorf("relock: resource lock %q: %s: %w (%w)", l.name, op, reentrant.ErrClosed, err)
	}
	return fmt.Errorf("relock: resource lock %q: %s: %w", l.name, op, err)
}

var _ resourcelock.Interface = (*ResourceLock)(nil)
