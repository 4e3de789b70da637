package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// A lease record is relock's stand-in for a Kubernetes Lease, for an
// elector that decides who leads on its own clock (client-go's
// leaderelection, through reentrant/election/kube). Its keys are relock's
// own: Redisson has no such record.

var (
	//go:embed leaserecord.lua
	leaseRecordLua    string
	leaseRecordScript = newScript(clockLib, tokenLib, leaseRecordLua)
)

// leaseRecordKey returns the key of name's lease record:
// relock_lease:{name}.
func leaseRecordKey(name string) string { return prefixed("relock_lease", name) }

// LeaseRecord is a lease record as read or written: the elector's record,
// the version every write raises, and the fenced term of its holder.
type LeaseRecord struct {
	Record  string
	Version int64
	Term    int64
}

// LeaseWrite is what a write of a lease record reports.
type LeaseWrite int

// The outcomes of a write.
const (
	// LeaseUnknown: the call failed (its error says why); whether it
	// wrote is not known.
	LeaseUnknown LeaseWrite = iota
	// LeaseWritten: the record was written (with an error beside it when
	// replicas did not confirm the write).
	LeaseWritten
	// LeaseExists: a create found a record: nothing was written.
	LeaseExists
	// LeaseConflict: an update found another version than the one its
	// writer saw: another wrote first, and nothing was written.
	LeaseConflict
	// LeaseMissing: an update found no record: nothing was written.
	LeaseMissing
)

// LeaseRecordGet reads name's lease record; found is false when there is
// none.
func LeaseRecordGet(ctx context.Context, c Conn, name string) (rec LeaseRecord, found bool, err error) {
	r, _ := leaseRecordScript.exec(ctx, Conn{Client: c.Client}, leaseRecordKeys(name), []string{"get"})
	vs, err := r.ToArray()
	if err != nil {
		return LeaseRecord{}, false, err
	}
	if len(vs) != 3 {
		return LeaseRecord{}, false, fmt.Errorf("leaserecord.lua: unexpected reply of %d values", len(vs))
	}
	text, err := vs[0].ToString()
	switch {
	case rueidis.IsRedisNil(err): // no record
		return LeaseRecord{}, false, nil
	case err != nil:
		return LeaseRecord{}, false, fmt.Errorf("leaserecord.lua: unexpected record: %w", err)
	}
	rec.Record = text
	rec.Version, _ = vs[1].AsInt64()
	rec.Term, _ = vs[2].AsInt64()
	return rec, true, nil
}

// LeaseRecordCreate writes name's lease record, naming holder, unless one
// exists (LeaseExists).
func LeaseRecordCreate(ctx context.Context, c Conn, name, record, holder string) (LeaseRecord, LeaseWrite, error) {
	return leaseRecordWrite(ctx, c, name, []string{"create", record, holder})
}

// LeaseRecordUpdate writes name's lease record, naming holder, over the
// version seen: LeaseConflict if another version is there, LeaseMissing
// if none is. counted is the leader transitions the writer counted: a
// holder that counted past the term on record draws a new term, as a new
// holder does (leaserecord.lua).
func LeaseRecordUpdate(ctx context.Context, c Conn, name string, seen int64, record, holder string, counted int64) (LeaseRecord, LeaseWrite, error) {
	return leaseRecordWrite(ctx, c, name, []string{"update", record, holder,
		strconv.FormatInt(seen, 10), strconv.FormatInt(counted, 10)})
}

func leaseRecordWrite(ctx context.Context, c Conn, name string, args []string) (LeaseRecord, LeaseWrite, error) {
	r, syncErr := leaseRecordScript.exec(ctx, c, leaseRecordKeys(name), args)
	vs, err := r.ToArray()
	if err != nil {
		return LeaseRecord{}, LeaseUnknown, err
	}
	if len(vs) == 0 {
		return LeaseRecord{}, LeaseUnknown, fmt.Errorf("leaserecord.lua: empty reply")
	}
	switch n, _ := vs[0].AsInt64(); {
	case n == 0 && args[0] == "create":
		return LeaseRecord{}, LeaseExists, nil
	case n == 0:
		return LeaseRecord{}, LeaseConflict, nil
	case n == -1:
		return LeaseRecord{}, LeaseMissing, nil
	case len(vs) != 3:
		return LeaseRecord{}, LeaseUnknown, fmt.Errorf("leaserecord.lua: unexpected reply of %d values", len(vs))
	}
	rec := LeaseRecord{Record: args[1]}
	rec.Version, _ = vs[1].AsInt64()
	rec.Term, _ = vs[2].AsInt64()
	return rec, LeaseWritten, syncErr
}

// leaseRecordKeys are the keys of name's lease record script: the record,
// and the fenced lock's token counter, whose terms it draws.
func leaseRecordKeys(name string) []string {
	return []string{leaseRecordKey(name), tokenCounter(name)}
}
