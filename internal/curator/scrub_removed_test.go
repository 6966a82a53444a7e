package curator

import (
	"context"
	"fmt"
	"testing"
)

// A full job that removes egroups (data removal) or moves replicas must
// not then report their vanished files as bad replicas when it scrubs:
// scrubbing works from the scan's view, which the job's own tasks change.
func TestScrubIgnoresEgroupsRemovedByTheJob(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		e.put(fmt.Sprintf("k%03d", i), data(uint64(i), 50_000), "ssd=1,hdd=1")
	}
	keep := data(999, 50_000)
	for i := 0; i < 40; i++ {
		if err := e.l.Delete(ctx, "bkt", fmt.Sprintf("k%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rec := e.run("full")
	if rec.Done["remove-egroup"] == 0 {
		t.Fatalf("the job removed no egroup (planned %v): the scenario needs data removal", rec.Planned)
	}
	if rec.BadFound != 0 {
		t.Fatalf("scrub reported %d bad replicas after the job removed %d egroups itself", rec.BadFound, rec.Done["remove-egroup"])
	}
	e.put("after", keep, "ssd=1,hdd=1")
	e.check("after", keep)
}
