// Package console is the operator's web console: a single page served by
// each node's admin listener under /console/, with everything it needs
// embedded in the binary (embed), so it works on a machine with no
// network beyond the node.
//
// # What it owns
//
//   - Login and sessions. A browser cannot sign requests with SigV4, so
//     the console has its own login form: an admin's access key and
//     secret key are checked against the same keyring the admin API
//     verifies signatures with, and the browser gets a session cookie
//     (HttpOnly, SameSite=Strict, Secure under TLS) holding an expiring
//     token MACed with a key derived from that admin's secret. The server
//     keeps no session table: a token is verified by recomputing its MAC,
//     so it dies with its expiry, with a rotated secret, with a removed
//     key or admin role, or with logout (revoked nonces are remembered
//     until their expiry). State-changing requests and every admin API
//     request (GETs included) must also carry a CSRF token derived from
//     the session, and failed logins are limited per client address. An unauthenticated browser only ever sees the
//     login page and static assets.
//   - The console API under /console/api/: the session, the metric
//     history and a server-sent-event stream of new samples for live
//     updates, and — under /console/api/v1/ — the admin API itself,
//     served in-process as the logged-in admin (adminauth.WithPrincipal),
//     so the page uses exactly the endpoints the CLI uses and new ones
//     (policies, users) appear without console changes.
//   - The Sampler: a bounded in-memory ring of per-tier samples (usage,
//     hot/cold bytes, read/write throughput, client latency) that the
//     charts draw; Prometheus keeps the long history. The tier report
//     (a metadata scan, for hot and cold bytes) is read at most every
//     slow interval and only while someone looks: a page open, or
//     Prometheus collecting. Its Collector exports the last report's hot
//     and cold bytes, so a scrape never scans metadata itself.
//   - The page itself (static/): plain JavaScript without a build step;
//     it builds the DOM with textContent only, so object names cannot
//     inject markup, and a Content-Security-Policy allows nothing from
//     elsewhere.
//
// # What it must not do
//
// No data path and no decisions: it reads and changes the store only
// through the admin API handler it is given, and it never reads metadata
// or devices itself (the node hands the sampler a Source). It does not
// import internal/server (the server mounts it).
//
// # Dependencies
//
// The charts are uPlot 1.6.32 (MIT licence, static/vendor/uPlot.LICENSE;
// 51 KB minified, no dependencies, actively maintained), vendored as a
// static asset from its npm package: small enough to embed, fast on
// thousands of points, and drawn on a canvas without any network access.
package console
