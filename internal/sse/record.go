package sse

import (
	"encoding/json"
	"fmt"
)

// ObjectHeader is the key, among an object's (or multipart upload's)
// stored headers, of its encryption record. Stored headers are returned to
// clients only by name, so the record never leaves the server.
const ObjectHeader = "x-terrace-sse"

// Encryption modes of a stored object.
const (
	ModeS3 = "S3" // data key sealed with the master keyring
	ModeC  = "C"  // data key sealed with a key derived from the customer's key
)

// ObjectRecord is an object's encryption record.
type ObjectRecord struct {
	Mode string `json:"m"`
	// Key is the sealed data key.
	Key string `json:"k"`
	// KeyMD5 is the SSE-C customer key's MD5 (base64), as clients send
	// and AWS returns it.
	KeyMD5 string `json:"c,omitempty"`
}

// ParseObjectRecord parses a stored record.
func ParseObjectRecord(s string) (*ObjectRecord, error) {
	var r ObjectRecord
	if err := json.Unmarshal([]byte(s), &r); err != nil || (r.Mode != ModeS3 && r.Mode != ModeC) || r.Key == "" {
		return nil, fmt.Errorf("%w: corrupt encryption record", ErrFormat)
	}
	return &r, nil
}

// Encode is the stored form.
func (r ObjectRecord) Encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Rewrap re-seals a keyring-sealed value with the active key; changed is
// false when it already was sealed with it.
func (k *Keyring) Rewrap(purpose, sealed string) (out string, changed bool, err error) {
	if k.SealedWithActive(sealed) {
		return sealed, false, nil
	}
	pt, err := k.Open(purpose, sealed)
	if err != nil {
		return "", false, err
	}
	out, err = k.Seal(purpose, pt)
	return out, err == nil, err
}
