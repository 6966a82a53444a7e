package object

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Options configure a Layer. Zero values mean defaults (EnsureDefaults).
type Options struct {
	Node model.NodeID
	// DefaultVector applies when neither the request, its storage class nor
	// the bucket names one. "any=2" keeps two replicas wherever placement
	// likes (never in volatile memory).
	DefaultVector model.Vector
	// Classes maps S3 storage-class names to vectors. A zero vector means
	// "the bucket default".
	Classes map[string]model.Vector
	// ExtentMaxBytes caps one extent. 4 MiB keeps per-object metadata small
	// (a 1 GiB object has 256 extent refs) while a GC move of one extent
	// stays cheap.
	ExtentMaxBytes int64
	// EgroupMaxBytes is the size at which an egroup is sealed. 16 MiB
	// amortises per-file costs and is still a quick unit to migrate.
	EgroupMaxBytes int64
	// MaxOpenEgroups bounds concurrent writers' open egroups (and so the
	// number of concurrent writes); further writers wait.
	MaxOpenEgroups int
	// MaxObjectBytes bounds one object. The object record must stay under
	// the metadata value limit: 25,000 extent refs of 4 MiB is ~100 GiB.
	MaxObjectBytes int64
	// StatsInterval is how often the placement snapshot is refreshed from
	// live device counters; placements in between are folded in.
	StatsInterval time.Duration
	// AccessFlushInterval is how often batched egroup access records are
	// written to the access map.
	AccessFlushInterval time.Duration
	// AccessWindow is the window of the per-egroup recent-read counter
	// that tiering uses to find hot data.
	AccessWindow time.Duration
	// HotReads, when > 0, makes the access tracker request a promotion
	// (meta.HotKey) when an egroup's reads within AccessWindow reach it,
	// so the Curator master promotes hot data without waiting for a scan.
	// The server sets it to the Curator's promote_reads when tiering is on.
	HotReads int64
	// SealIdleAfter seals an open egroup no writer has used for this long,
	// handing it to the Curator (GC, tiering). One minute keeps hot
	// writers appending to the same egroup while idle ones are released.
	SealIdleAfter time.Duration
	// EgroupRecordLag is how far an open egroup's committed length may
	// run ahead of the length its record states before the writer
	// rewrites the record. A small PUT then commits its object and extent
	// records only (two metadata keys instead of three, the egroup record
	// being rewritten about once per EgroupRecordLag of appends); whoever
	// seals an egroup whose writer is gone finds the committed length in
	// its extent records (Egroup.TailFrom). 0 means 1 MiB; negative
	// rewrites the record at every commit, which a cluster needs while
	// some of its nodes run a version that does not know the tail
	// (docs/operations.md, upgrades).
	EgroupRecordLag int64
	// BatchMaxBytes is the largest object whose PUT shares an egroup
	// append with concurrent small PUTs of the same vector and transform
	// class: one fsynced append and one replica call per batch instead of
	// per object (docs/design/0012). 0 means 64 KiB; negative turns
	// batching off. At most 128 KiB. Batching needs egroup records that
	// may lag (EgroupRecordLag > 0).
	BatchMaxBytes int64
	// OrphanGrace delays start-up removal of replica files that have no
	// egroup record (see Recover). 0 removes them at once, which is right
	// for a single node; in a cluster a peer may be between writing such
	// a file and committing its record, so the server sets minutes.
	OrphanGrace time.Duration
	// OrphanSweepRate bounds the periodic orphan sweep (SweepOrphans) to
	// this many egroup records read per second, so that it stays a small
	// load on the metadata store next to clients. 0 means 200.
	OrphanSweepRate float64
	// OrphanHolds, in a cluster, asks the other nodes which of the given
	// egroups their writers created and may still commit (Layer.HeldEgroups
	// on each): the orphan sweep never removes a file of such an egroup,
	// whose record does not exist yet. An error keeps every file without a
	// record for the next sweep. nil: a single node, whose writers are all
	// local.
	OrphanHolds func(ctx context.Context, ids []uint64) ([]uint64, error)
	// FallbackEgroupLifetime is how long an open egroup that placement
	// had to put on a slower tier (its preferred tier was full) keeps
	// taking new writes; then it is sealed so the next write is placed
	// afresh, on the fast tier once tiering has made room. 0 means 10 s.
	FallbackEgroupLifetime time.Duration
	// LocationCacheEntries bounds the cache of extent and egroup records
	// the read path keeps (see locationCache); 0 means 65,536, negative
	// turns the cache off.
	LocationCacheEntries int
	// LocationCacheEgroupTTL is how long a cached egroup record (its
	// replica list) is used before it is read again, so reads reach a
	// replica a move added within that time. 0 means 10 s: at most one
	// extra metadata read per hot egroup per node every 10 s (100/s for
	// 1,000 hot egroups, against thousands of reads); negative: never
	// expire.
	LocationCacheEgroupTTL time.Duration
	// ReadOrder names the replica ordering of reads (placement.ReadOrders):
	// "octopus" (tier-, load- and network-aware, OctopusFS Eq. 12; the
	// default) or "locality" (this node's replicas first, the baseline).
	ReadOrder string
	Policy    placement.Policy
	Logger    *slog.Logger
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// maxBatchBytes bounds Options.BatchMaxBytes: a batched write's encoded
// extent must stay below pooledEncodeMin, because it is kept until the
// commit and may be written again.
const maxBatchBytes = 128 << 10

// DefaultClasses is the storage-class table used when Options.Classes is
// nil. STANDARD inherits the bucket default; REDUCED_REDUNDANCY keeps one
// replica; the infrequent-access classes go to the hdd tier;
// INTELLIGENT_TIERING lets the system choose.
func DefaultClasses() map[string]model.Vector {
	return map[string]model.Vector{
		"STANDARD":            {},
		"REDUCED_REDUNDANCY":  model.MustParseVector("any=1"),
		"STANDARD_IA":         model.MustParseVector("hdd=2"),
		"ONEZONE_IA":          model.MustParseVector("hdd=1"),
		"GLACIER_IR":          model.MustParseVector("hdd=2"),
		"INTELLIGENT_TIERING": model.MustParseVector("any=2"),
		"EXPRESS_ONEZONE":     model.MustParseVector("ssd=1"),
	}
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Node == "" {
		o.Node = "n1"
	}
	if o.DefaultVector.IsZero() {
		o.DefaultVector = model.MustParseVector("any=2")
	}
	if o.Classes == nil {
		o.Classes = DefaultClasses()
	}
	if o.ExtentMaxBytes == 0 {
		o.ExtentMaxBytes = 4 << 20
	}
	if o.EgroupMaxBytes == 0 {
		o.EgroupMaxBytes = 16 << 20
	}
	if o.MaxOpenEgroups == 0 {
		o.MaxOpenEgroups = 64
	}
	if o.MaxObjectBytes == 0 {
		o.MaxObjectBytes = 100 << 30
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = time.Second
	}
	if o.AccessFlushInterval == 0 {
		o.AccessFlushInterval = 5 * time.Second
	}
	if o.AccessWindow == 0 {
		o.AccessWindow = 10 * time.Minute
	}
	if o.FallbackEgroupLifetime == 0 {
		o.FallbackEgroupLifetime = 10 * time.Second
	}
	if o.LocationCacheEntries == 0 {
		o.LocationCacheEntries = 1 << 16
	}
	if o.LocationCacheEgroupTTL == 0 {
		o.LocationCacheEgroupTTL = 10 * time.Second
	}
	if o.BatchMaxBytes == 0 {
		o.BatchMaxBytes = 64 << 10
	}
	if o.EgroupRecordLag == 0 {
		o.EgroupRecordLag = 1 << 20
	}
	if o.OrphanSweepRate <= 0 {
		o.OrphanSweepRate = 200
	}
	if o.SealIdleAfter == 0 {
		o.SealIdleAfter = time.Minute
	}
	if o.Policy == nil {
		o.Policy = placement.Uniform{}
	}
	if o.ReadOrder == "" {
		o.ReadOrder = "octopus"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate rejects bad combinations.
func (o *Options) Validate() error {
	if _, ok := placement.ReadOrders[o.ReadOrder]; !ok {
		return fmt.Errorf("object: read order %q: want octopus or locality", o.ReadOrder)
	}
	if err := o.DefaultVector.Validate(); err != nil {
		return fmt.Errorf("object: default vector: %w", err)
	}
	if o.ExtentMaxBytes < 4096 || o.ExtentMaxBytes > 64<<20 {
		return fmt.Errorf("object: extent size %d outside [4KiB, 64MiB]", o.ExtentMaxBytes)
	}
	if o.EgroupMaxBytes < o.ExtentMaxBytes {
		return fmt.Errorf("object: egroup size %d smaller than extent size %d", o.EgroupMaxBytes, o.ExtentMaxBytes)
	}
	if o.BatchMaxBytes > maxBatchBytes {
		return fmt.Errorf("object: batch size %d over %d", o.BatchMaxBytes, maxBatchBytes)
	}
	if o.MaxOpenEgroups < 1 || o.MaxOpenEgroups > 4096 {
		return fmt.Errorf("object: max open egroups %d outside [1, 4096]", o.MaxOpenEgroups)
	}
	for name, v := range o.Classes {
		if name != strings.ToUpper(name) || name == "" {
			return fmt.Errorf("object: storage class %q must be upper case", name)
		}
		if !v.IsZero() {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("object: storage class %s: %w", name, err)
			}
		}
	}
	return nil
}

// String prints the options for logs.
func (o Options) String() string {
	return fmt.Sprintf("node=%s default_vector=%s extent=%d egroup=%d open_egroups=%d policy=%s stats_interval=%s",
		o.Node, o.DefaultVector, o.ExtentMaxBytes, o.EgroupMaxBytes, o.MaxOpenEgroups, o.Policy.Name(), o.StatsInterval)
}
