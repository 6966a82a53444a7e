package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/chromedp/chromedp"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// adminGet reads an admin API endpoint with a signed request (the test's
// independent view of what the console should show).
func adminGet(t *testing.T, n *node, path string, q url.Values, out any) {
	t.Helper()
	u := n.admin + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	resp, err := adminauth.Client(rootUser, rootPassword).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, readAll(resp.Body))
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

func TestConsole(t *testing.T) {
	needBrowser(t)
	n := startNode(t)
	t.Run("unauthenticated browser gets the login page", func(t *testing.T) { testLoginRequired(t, n) })
	t.Run("operator workflow", func(t *testing.T) { testOperatorWorkflow(t, n) })
}

func testLoginRequired(t *testing.T, n *node) {
	ctx := browser(t)
	for _, page := range []string{"/", "/console/", "/console/#/objects", "/console/#/curator"} {
		var loc string
		run(t, ctx, "open "+page+" without a session",
			chromedp.Navigate(n.admin+page),
			chromedp.WaitVisible(css(`#login-form`)),
			into(&loc, chromedp.Location()))
		if u, err := url.Parse(loc); err != nil || u.Path != "/console/login" {
			t.Errorf("unauthenticated %s ended at %s, want the login page", page, loc)
		}
	}
	screenshot(t, ctx, "console-login")
	// The page's own requests to the console API and to the signed admin
	// API are refused without a session.
	for path, want := range map[string]int64{"/console/api/v1/status": 401, "/console/api/history": 401, "/v1/status": 401} {
		var status int64
		run(t, ctx, "fetch "+path,
			into(&status, chromedp.Evaluate[int64](fmt.Sprintf(`fetch(%q, {credentials: 'same-origin'}).then(r => r.status)`, path), chromedp.EvalAwaitPromise)))
		if status != want {
			t.Errorf("unauthenticated fetch %s: %d, want %d", path, status, want)
		}
	}
	// A wrong secret is refused with a message, and no session.
	login(t, ctx, n, rootUser, "not-the-secret")
	var msg, loc string
	run(t, ctx, "wrong secret", chromedp.WaitVisible(css(`#login-error`)), into(&msg, chromedp.Text(css(`#login-error`))),
		chromedp.Navigate(n.admin+"/console/"), chromedp.WaitVisible(css(`#login-form`)), into(&loc, chromedp.Location()))
	if !strings.Contains(msg, "Wrong access key or secret key") {
		t.Errorf("wrong secret: message %q", msg)
	}
	// A forged cookie does not open the console either.
	var status int64
	run(t, ctx, "forged cookie",
		into(&status, chromedp.Evaluate[int64](`document.cookie = "terrace_console=v1.Y29uc29sZS1hZG1pbg.99999999999.bm9uY2U.AAAA; path=/console/"; fetch('/console/api/session').then(r => r.status)`, chromedp.EvalAwaitPromise)))
	if status != 401 {
		t.Errorf("forged session cookie: %d, want 401", status)
	}
}

func testOperatorWorkflow(t *testing.T, n *node) {
	c := n.s3Client()
	bg := context.Background()
	if _, err := c.CreateBucket(bg, &s3.CreateBucketInput{Bucket: aws.String("photos")}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, size int, class s3types.StorageClass) []byte {
		body := make([]byte, size)
		_, _ = rand.Read(body)
		if _, err := c.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String(key), Body: bytes.NewReader(body), StorageClass: class}); err != nil {
			t.Fatalf("S3 put %s: %v", key, err)
		}
		return body
	}
	// New data goes to the fastest tier: these objects (default vector
	// any=2) fill the small ssd past the tiering threshold, and the scan
	// below moves their cold replicas down to the hdds.
	put("2024/cat.jpg", 700<<10, s3types.StorageClassExpressOnezone) // ssd=1
	for i := range 8 {
		put(fmt.Sprintf("2024/raw/img-%02d.raw", i), 1<<20, "")
	}
	put("archive/readme.txt", 12<<10, s3types.StorageClassStandardIa)

	ctx := browser(t)
	login(t, ctx, n, rootUser, rootPassword)

	// Overview: a row for every device of every tier, as the node reports.
	var st struct {
		Devices []struct {
			ID   string
			Tier string
		} `json:"devices"`
	}
	adminGet(t, n, "/v1/status", nil, &st)
	var want []string
	for _, d := range st.Devices {
		want = append(want, d.Tier+" "+d.ID)
	}
	sort.Strings(want)
	var got []string
	run(t, ctx, "overview",
		chromedp.WaitVisible(css(`#panel-devices tr[data-device]`)),
		chromedp.WaitVisible(css(`#health-state`)),
		into(&got, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#panel-devices tr[data-device]')].map(e => e.dataset.tier + ' ' + e.dataset.device).sort()`)))
	if !slices.Equal(got, want) {
		t.Errorf("overview devices %v, want %v", got, want)
	}
	for _, tier := range []string{"mem", "ssd", "hdd"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, tier+" ") }) {
			t.Errorf("overview shows no %s device: %v", tier, got)
		}
	}
	var nodeRow string
	run(t, ctx, "nodes panel", into(&nodeRow, chromedp.Text(css(`#panel-nodes tr[data-node="n1"]`))))
	if !strings.Contains(nodeRow, "up") || !strings.Contains(nodeRow, "r1") {
		t.Errorf("node row %q: want n1 up in rack r1", nodeRow)
	}
	screenshot(t, ctx, "console-overview")

	// Objects: browse to the uploaded object and locate it.
	// The tables re-render as their data arrives: each row is found and
	// clicked in one step inside the page (clickLive).
	run(t, ctx, "browse to the object",
		chromedp.Navigate(n.admin+"/console/#/objects"),
		clickLive(`tr[data-bucket="photos"]`),
		chromedp.WaitVisible(css(`tr[data-prefix="2024/"]`)),
		chromedp.WaitVisible(css(`tr[data-prefix="archive/"]`)),
		clickLive(`tr[data-prefix="2024/"]`),
		clickLive(`tr[data-key="2024/cat.jpg"]`),
		chromedp.WaitVisible(css(`#locate-tree .replica`)))
	var name, vector string
	var shown []string
	run(t, ctx, "read the location", into(&name, chromedp.Text(css(`#located-name`))), into(&vector, chromedp.Text(css(`#located-vector`))),
		into(&shown, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#locate-tree .replica')].map(e => e.querySelector('code').textContent + ' ' + e.dataset.replicaTier).sort()`)))
	var loc struct {
		Vector  string `json:"vector"`
		Extents []struct {
			Replicas []struct {
				D string `json:"d"`
				T string `json:"t"`
			} `json:"replicas"`
		} `json:"extents"`
	}
	adminGet(t, n, "/v1/object/locate", url.Values{"bucket": {"photos"}, "key": {"2024/cat.jpg"}}, &loc)
	var wantReps []string
	for _, x := range loc.Extents {
		for _, r := range x.Replicas {
			if !slices.Contains(wantReps, r.D+" "+r.T) {
				wantReps = append(wantReps, r.D+" "+r.T)
			}
		}
	}
	sort.Strings(wantReps)
	if name != "photos/2024/cat.jpg" || vector != "ssd=1" || !slices.Equal(shown, wantReps) {
		t.Errorf("located %q vector %q replicas %v; want photos/2024/cat.jpg, ssd=1, %v", name, vector, shown, wantReps)
	}
	screenshot(t, ctx, "console-objects")

	// Change its vector in the browser; the node agrees afterwards.
	run(t, ctx, "set the vector",
		chromedp.SetValue(css(`#vector-input`), "hdd=1"),
		chromedp.Click(css(`#vector-form button`)),
		chromedp.WaitVisible(css(`#vector-result .msg.ok`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#located-vector') && document.querySelector('#located-vector').textContent === 'hdd=1' &&
			[...document.querySelectorAll('#locate-tree .replica')].every(e => e.dataset.replicaTier === 'hdd')`, chromedp.WithPollingTimeout(20*time.Second)))
	adminGet(t, n, "/v1/object/locate", url.Values{"bucket": {"photos"}, "key": {"2024/cat.jpg"}}, &loc)
	if loc.Vector != "hdd=1" {
		t.Errorf("after the console changed it, the node says vector %q", loc.Vector)
	}
	// A bad vector is an error message, not a blank panel.
	var errText string
	run(t, ctx, "bad vector",
		chromedp.SetValue(css(`#vector-input`), "floppy=9"),
		chromedp.Click(css(`#vector-form button`)),
		chromedp.WaitVisible(css(`#vector-result .msg.error`)),
		into(&errText, chromedp.Text(css(`#vector-result .msg.error`))))
	if !strings.Contains(errText, "InvalidArgument") {
		t.Errorf("bad vector message %q, want the API's InvalidArgument", errText)
	}

	// Curator: run a full scan from the browser and watch it appear.
	run(t, ctx, "curator page",
		chromedp.Navigate(n.admin+"/console/#/curator"),
		chromedp.WaitVisible(css(`#run-full`)),
		chromedp.WaitVisible(css(`#panel-history h2`)))
	var before int
	run(t, ctx, "count scans", into(&before, chromedp.Evaluate[int](`document.querySelectorAll('#history-table tr[data-kind="full"]').length`)))
	run(t, ctx, "run a full scan",
		chromedp.Click(css(`#run-full`)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll('#history-table tr[data-kind="full"]').length > %d`, before), chromedp.WithPollingTimeout(60*time.Second)))
	// The scan found cold data on the over-full ssd: a job of tier-down
	// moves appears (live, without a reload), and each move says why.
	// The jobs table re-renders live: find and click the row in one step
	// inside the page (a node found first can be replaced before a
	// separate click lands: "Could not find node with given id").
	run(t, ctx, "the scan's job appears",
		clickLive(`#jobs-table tr[data-job]`),
		chromedp.WaitVisible(css(`#tasks-table tbody tr`)))
	var tasks []map[string]string
	run(t, ctx, "read the tasks", into(&tasks, chromedp.Evaluate[[]map[string]string](`[...document.querySelectorAll('#tasks-table tbody tr')].map(r => ({kind: r.dataset.taskKind, reason: r.children[5].textContent, state: r.children[6].textContent}))`)))
	var jobs struct {
		Recent []struct {
			ID    string `json:"id"`
			Tasks int    `json:"tasks"`
		} `json:"recent"`
	}
	adminGet(t, n, "/v1/curator/jobs", nil, &jobs)
	if len(jobs.Recent) == 0 || len(tasks) == 0 {
		t.Fatalf("jobs %+v, tasks shown %v", jobs, tasks)
	}
	for _, task := range tasks {
		if task["reason"] == "" || task["reason"] == "-" {
			t.Errorf("task %v shown without a reason", task)
		}
	}
	run(t, ctx, "wait for the job to finish",
		chromedp.Poll[chromedp.Void](`document.querySelector('#jobs-table tr[data-job] .badge') && document.querySelector('#jobs-table tr[data-job] .badge').textContent === 'finished'`, chromedp.WithPollingTimeout(60*time.Second)))
	screenshot(t, ctx, "console-curator")

	// Tiers over time: charts from the node's metric ring.
	run(t, ctx, "tier charts",
		chromedp.Navigate(n.admin+"/console/#/tiers"),
		chromedp.WaitVisible(css(`#chart-usage canvas`)),
		chromedp.WaitVisible(css(`#chart-latency canvas`)))
	screenshot(t, ctx, "console-tiers")

	// Policies: listed when the node has them, else a clear message.
	var pol string
	run(t, ctx, "policies page",
		chromedp.Navigate(n.admin+"/console/#/policies"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#policies-disabled, #policies-table, #panel-policies p') !== null`, chromedp.WithPollingTimeout(10*time.Second)),
		into(&pol, chromedp.Text(css(`#panel-policies`))))
	if strings.Contains(pol, "rror") {
		t.Errorf("policies page shows an error: %q", pol)
	}

	// Log out (the header's button, on every view): the console is closed
	// again.
	run(t, ctx, "log out",
		chromedp.WaitVisible(css(`#logout`)),
		chromedp.Click(css(`#logout`)),
		chromedp.WaitVisible(css(`#login-form`)),
		chromedp.Navigate(n.admin+"/console/"),
		chromedp.WaitVisible(css(`#login-form`)))
}

// clickLive waits (up to a minute) for an element matching sel and clicks
// it in the same step, inside the page. Tables the console re-renders as
// their data arrives replace their rows: a node found in one step can be
// gone before a separate click lands ("Could not find node with given id").
func clickLive(sel string) step {
	js := fmt.Sprintf(`(() => { const r = document.querySelector(%q); if (!r) return false; r.click(); return true; })()`, sel)
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(60*time.Second))
}
