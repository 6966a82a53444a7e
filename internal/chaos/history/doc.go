// Package history records what the chaos suite's clients did: one [Op]
// per client operation with its invocation and completion times, the key,
// the value written or read (as a digest), and the outcome — ok, failed
// (the request certainly had no effect) or unknown (a timeout or a broken
// connection: it may or may not have taken effect).
//
// Histories are JSON lines, one operation per line, so a run's history can
// be checked again later (`terrace chaos check`) or by other tools. The
// checker lives in the checker subpackage.
//
// It owns the record format and nothing else: no I/O beyond the writer and
// reader it offers, no knowledge of Terrace or of S3.
package history
