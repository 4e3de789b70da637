// Package errtext words relock's errors so that a message says "relock: "
// once, at its head, however many of relock's layers wrap it: each layer
// says where (an unlock, an election) and passes on what the layer below
// said, less its own head.
package errtext

import "strings"

// Wrap returns an error whose message is where (which starts with
// "relock: "), a colon, and err's message without its leading "relock: ";
// it wraps err, so errors.Is and errors.As see through it.
func Wrap(where string, err error) error {
	return &wrapped{msg: where + ": " + strings.TrimPrefix(err.Error(), "relock: "), err: err}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
