// Package server assembles one Terrace node: it opens the configured
// devices (probing their throughput), the metadata store, the object layer,
// runs start-up recovery, and serves the S3 gateway, the admin API and
// Prometheus metrics until its context ends.
//
// It owns configuration (YAML file, environment, flags — flags win) and
// process lifecycle. It makes no placement or background decisions of its
// own; it wires the packages that do.
package server
