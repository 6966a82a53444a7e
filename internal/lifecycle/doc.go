// Package lifecycle runs S3 lifecycle rules: expiration of objects (after a
// number of days or on a date), abort of incomplete multipart uploads, and
// transitions to storage classes. A transition changes the object's class
// and with it its replication vector, and the object layer rewrites the
// bytes under the new vector (object.Layer.Transition), so S3 users steer
// Terrace's tiering with the API they already know: a rule moving objects
// to STANDARD_IA after 30 days moves them to hdd.
//
// It owns the rule model (Config, Rule) and its evaluation, which is pure:
// Config.Decide and Config.DecideUpload take an object (or upload) and a
// time and return what to do, with no I/O; and the Runner, which on the
// Curator leader (or the single node) periodically lists the buckets that
// have rules and applies the decisions through the object layer's
// conditional operations (DeleteIf, Transition, AbortUpload), each guarded
// by compare-and-swap on the record the decision was made on, so an object
// overwritten meanwhile is left alone (docs/design/0000 invariant 3).
//
// It must not parse S3 requests (package s3 turns the XML into a Config)
// nor move bytes itself.
//
// Timing follows AWS: an object becomes due N days after it was last
// written, rounded up to the next midnight UTC; a date rule is due at the
// date. Runner.Options.Day scales "a day" for demos and tests (a day of
// 10 s turns a 30-day rule into a 5-minute one); with it, rounding is to
// the next multiple of the day.
package lifecycle
