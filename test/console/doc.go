// Package console holds the web console's end-to-end tests
// (console_test.go): a real `terrace server` process, real S3 uploads and
// a real headless Chromium driven through the Chrome DevTools Protocol.
// It has no non-test code.
//
// # Dependency
//
// github.com/chromedp/chromedp (v0.23, MIT) drives the browser: pure Go,
// talks to Chromium over a pipe with no separate driver process or
// Node.js runtime, maintained, and lets the tests stay Go tests that run
// in `go test` / `make test`. The browser itself is the Debian chromium
// package (.ci/run installs it); without it the tests skip and say why.
package console
