// Package cli is the `terrace bench` command tree: s3, compare, device, and
// any scenarios registered with RegisterScenario. It parses flags, starts a
// local Terrace when asked, draws progress on a terminal and prints results;
// all measuring is done by package bench.
//
// Dependencies: cobra/pflag (the project's CLI library);
// github.com/schollz/progressbar/v3 for the bar (maintained, no cgo, renders
// to any writer and clears itself, so results print on a clean line); and
// golang.org/x/term to draw it only when stderr is a terminal.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terrace-storage/terrace/internal/bench"
)

// Command returns the `bench` command with its subcommands.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure S3 endpoints and devices, and compare Terrace with other systems",
		Long: `Benchmarks for Terrace and for the systems users would pick instead.

  s3       load one S3 endpoint (any S3 service) and report ops/s, MB/s,
           latency percentiles, errors, and client and server CPU and memory
  compare  run the same workload against several endpoints in alternation
           (A B A B ...) and report ratios against a baseline
  device   measure the raw device under a directory (fio if installed), so
           results can be stated as a fraction of what the hardware can do

Every GET body is verified byte for byte: object content is a function of the
key and --seed, so no copy is kept. Results print as a table, or JSON with
--output json; --json-file also saves the JSON. A progress bar is drawn on
stderr when it is a terminal.`,
		Example: `  # 4 KiB PUTs then GETs against a local Terrace started for the run
  terrace bench s3 --start-terrace --workload put --size 4KiB -c 16 -d 10s
  terrace bench s3 --start-terrace --workload get --size 4KiB -c 16 -d 10s

  # Terrace against versitygw's posix backend, 3 alternating rounds
  terrace bench compare --start-terrace \
    --endpoint versitygw=http://127.0.0.1:7070,access=bench,secret=benchsecret,pid=$(pgrep -n versitygw) \
    --workload put --size 4MiB -c 16 -d 5s --rounds 3

  # Device ceiling of the data directory's disk
  terrace bench device /var/lib/terrace`,
		SilenceUsage: true,
	}
	cmd.AddCommand(s3Command(), compareCommand(), deviceCommand())
	for _, s := range scenarios {
		cmd.AddCommand(s())
	}
	return cmd
}

// workloadFlags are shared by s3 and compare.
type workloadFlags struct {
	workload    string
	size        string
	concurrency int
	duration    time.Duration
	count       int64
	warmup      time.Duration
	objects     int
	bucket      string
	prefix      string
	seed        uint64
	verify      bool
	listMaxKeys int
	keep        bool
	reuse       bool
	signPayload bool
	opTimeout   time.Duration
	maxErrors   int64
}

func (f *workloadFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.workload, "workload", "w", "put", "put, get, head, list, delete, mixed, or a weighted mix like get=70,put=30")
	fs.StringVarP(&f.size, "size", "s", "4KiB", "object sizes: fixed (4KiB), uniform range (4KiB-1MiB), weighted (8KiB:90,32KiB:10) or oltp")
	fs.IntVarP(&f.concurrency, "concurrency", "c", 16, "clients, each with one request in flight")
	fs.DurationVarP(&f.duration, "duration", "d", 10*time.Second, "length of the timed phase (0 with --count: until the count)")
	fs.Int64VarP(&f.count, "count", "n", 0, "stop after this many requests (all clients together); 0 = no limit")
	fs.DurationVar(&f.warmup, "warmup", 0, "untimed warm-up before the timed phase, e.g. 2s")
	fs.IntVar(&f.objects, "objects", 0, "keyspace size for get/head/list/delete/mixed; 0 = min(1000, max(64, 1GiB/mean size))")
	fs.StringVar(&f.bucket, "bucket", "terrace-bench", "bucket (created if missing, deleted afterwards if created)")
	fs.StringVar(&f.prefix, "prefix", "bench/", "key prefix; everything under it is deleted afterwards unless --keep")
	fs.Uint64Var(&f.seed, "seed", 1, "seed for object content, sizes and each client's operation sequence")
	fs.BoolVar(&f.verify, "verify", true, "verify every GET body byte for byte (and HEAD sizes)")
	fs.IntVar(&f.listMaxKeys, "list-max-keys", 1000, "page size of LIST requests")
	fs.BoolVar(&f.keep, "keep", false, "leave objects and bucket in place afterwards")
	fs.BoolVar(&f.reuse, "reuse", false, "read workloads: HEAD each object first and write only missing ones (reuse a --keep run's objects, e.g. written through another node)")
	fs.BoolVar(&f.signPayload, "sign-payload", false, "SHA-256-sign PUT bodies instead of sending UNSIGNED-PAYLOAD (costs client CPU)")
	fs.DurationVar(&f.opTimeout, "op-timeout", 60*time.Second, "timeout of a single request")
	fs.Int64Var(&f.maxErrors, "max-errors", 1000, "stop the run after this many failed requests")
}

func (f *workloadFlags) options(cmd *cobra.Command) (bench.Options, error) {
	mix, err := bench.ParseWorkload(f.workload)
	if err != nil {
		return bench.Options{}, err
	}
	sizes, err := bench.ParseSizeDist(f.size)
	if err != nil {
		return bench.Options{}, err
	}
	dur := f.duration
	if f.count > 0 && !cmd.Flags().Changed("duration") {
		dur = 0 // --count alone runs until the count
	}
	o := bench.Options{
		Workload: mix, Sizes: sizes, Concurrency: f.concurrency, Duration: dur, Count: f.count,
		Warmup: f.warmup, Objects: f.objects, Bucket: f.bucket, Prefix: f.prefix, Seed: f.seed,
		NoVerify: !f.verify, ListMaxKeys: f.listMaxKeys, KeepObjects: f.keep, ReuseObjects: f.reuse, SignPayload: f.signPayload,
		OpTimeout: f.opTimeout, MaxErrors: f.maxErrors,
	}
	if f.concurrency <= 0 {
		return o, fmt.Errorf("bench: --concurrency must be positive")
	}
	o.EnsureDefaults()
	return o, o.Validate()
}

// outputFlags choose how results are printed.
type outputFlags struct {
	format   string
	jsonFile string
	quiet    bool
}

func (f *outputFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.format, "output", "o", "table", "stdout format: table or json")
	fs.StringVar(&f.jsonFile, "json-file", "", "also write the JSON result to this file")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
}

// validate checks the format. A persistent --json flag inherited from the
// root command (terrace has one) selects JSON too.
func (f *outputFlags) validate(cmd *cobra.Command) error {
	if fl := cmd.Flags().Lookup("json"); fl != nil && fl.Value.Type() == "bool" && fl.Value.String() == "true" {
		f.format = "json"
	}
	if f.format != "table" && f.format != "json" {
		return fmt.Errorf("bench: --output %q: want table or json", f.format)
	}
	return nil
}

func (f *outputFlags) progress() *progress {
	return newProgress(!f.quiet && stderrIsTerminal(), os.Stderr)
}

// emit prints v as a table (via table) or JSON to w, and saves JSON to
// --json-file.
func (f *outputFlags) emit(w io.Writer, v any, table func(io.Writer) error) error {
	if f.jsonFile != "" {
		jf, err := os.Create(f.jsonFile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		err = bench.WriteJSON(jf, v)
		if cerr := jf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("bench: write %s: %w", f.jsonFile, err)
		}
	}
	if f.format == "json" {
		return bench.WriteJSON(w, v)
	}
	return table(w)
}

// terraceFlags start a local Terrace for the run.
type terraceFlags struct {
	start   bool
	binary  string
	dataDir string
	args    []string
	name    string
	keep    bool
	timeout time.Duration
}

func (f *terraceFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.start, "start-terrace", false, "start a local single-node Terrace for the run and stop it afterwards")
	fs.StringVar(&f.binary, "terrace-bin", "", "terrace binary for --start-terrace (default: this program)")
	fs.StringVar(&f.dataDir, "terrace-data-dir", "", "data directory for --start-terrace (default: a temp dir, removed afterwards)")
	fs.StringArrayVar(&f.args, "terrace-arg", nil, "extra flag for the started server (repeatable), e.g. --terrace-arg=--default-vector=ssd=1")
	fs.StringVar(&f.name, "terrace-name", "terrace", "endpoint name of the started server")
	fs.BoolVar(&f.keep, "terrace-keep", false, "keep the started server's temp dir (data and server.log)")
	fs.DurationVar(&f.timeout, "terrace-start-timeout", 60*time.Second, "how long to wait for the started server's S3 port")
}

func (f *terraceFlags) startServer(ctx context.Context, errOut io.Writer) (*bench.Terrace, error) {
	t, err := bench.StartTerrace(ctx, bench.TerraceOptions{Binary: f.binary, DataDir: f.dataDir, Args: f.args, Keep: f.keep, StartTimeout: f.timeout})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(errOut, "started terrace pid %d on %s (data %s)\n", t.PID(), t.Endpoint(f.name).URL, t.DataDir())
	return t, nil
}

// credentialFlags default the credentials of endpoints that omit them.
type credentialFlags struct {
	access, secret, region string
}

func (f *credentialFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.access, "access-key", os.Getenv("AWS_ACCESS_KEY_ID"), "access key for endpoints that give none (default $AWS_ACCESS_KEY_ID)")
	fs.StringVar(&f.secret, "secret-key", "", "secret key for endpoints that give none (default $AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&f.region, "region", bench.DefaultRegion, "SigV4 signing region")
}

func (f *credentialFlags) defaults() bench.Endpoint {
	secret := f.secret
	if secret == "" {
		secret = os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	return bench.Endpoint{Access: f.access, Secret: secret, Region: f.region}
}

// signalContext is cancelled by SIGINT or SIGTERM, so a run stops, reports
// what it measured, and cleans up.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func s3Command() *cobra.Command {
	var (
		wf       workloadFlags
		of       outputFlags
		tf       terraceFlags
		cf       credentialFlags
		endpoint string
		pid      int
	)
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Load one S3 endpoint and report throughput, latency and resource use",
		Long: `Runs one workload against one S3 endpoint (path-style, SigV4 with static
credentials, no retries) and reports, per operation: requests, ops/s, MB/s
(10^6 bytes/s), p50/p90/p99/p99.9/max latency and errors; plus the client's CPU
seconds, and the server's CPU seconds and peak resident memory when its PID is
known (--server-pid, a pid= field, or --start-terrace). For a local cluster,
pid=A+B+C sums every node's CPU, and metrics=ADMIN-URL+... reads the nodes'
terrace_meta_* counters to report metadata reads, commits and store
transactions (etcd round trips) per operation.

Workloads that read (get, head, list, delete, mixed) first write --objects
objects, untimed. A PUT workload writes fresh keys. Afterwards everything under
--prefix is deleted (and the bucket, if this run created it) unless --keep.`,
		Example: `  # 16 clients writing 4 KiB objects for 10 s against MinIO on loopback
  terrace bench s3 --endpoint http://127.0.0.1:9000 --access-key minioadmin --secret-key minioadmin \
    --workload put --size 4KiB -c 16 -d 10s

  # GETs of 4 MiB objects with a 2 s warm-up, server CPU/RSS from its pid, JSON saved
  terrace bench s3 --endpoint vgw=http://127.0.0.1:7070,access=bench,secret=benchsecret,pid=4242 \
    --workload get --size 4MiB --warmup 2s --json-file get-4m.json

  # A 3-node dev cluster (terrace dev cluster --base-port 20000): CPU summed over the
  # three processes and metadata work per PUT from their admin APIs
  terrace bench s3 -e "c3=http://127.0.0.1:20000,pid=$(pgrep -d+ -f 'terrace server'),metrics=http://127.0.0.1:20001+http://127.0.0.1:20011+http://127.0.0.1:20021" \
    --access-key terrace --secret-key terrace-secret --workload put -c 16 -d 10s

  # The Curator paper's OLTP object mix, 70/30 read/write, exactly 100000 requests
  terrace bench s3 --start-terrace --workload get=70,put=30 --size oltp -n 100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := of.validate(cmd); err != nil {
				return err
			}
			opts, err := wf.options(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			var ep bench.Endpoint
			switch {
			case tf.start && endpoint != "":
				return errors.New("bench: give --endpoint or --start-terrace, not both")
			case tf.start:
				t, err := tf.startServer(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer func() {
					if err := t.Stop(); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
				}()
				ep = t.Endpoint(tf.name)
			case endpoint == "":
				return errors.New("bench: need --endpoint URL (or NAME=URL,access=KEY,secret=SECRET[,pid=PID]) or --start-terrace")
			default:
				if ep, err = bench.ParseEndpoint(endpoint, cf.defaults()); err != nil {
					return err
				}
				if pid > 0 {
					ep.PID = pid
				}
			}
			r, err := bench.NewRunner(ep, opts)
			if err != nil {
				return err
			}
			pr := of.progress()
			pr.watch(ep.Name, r)
			res, runErr := r.Run(ctx)
			cleanErr := r.Cleanup(context.WithoutCancel(ctx))
			pr.close()
			if res != nil {
				if err := of.emit(cmd.OutOrStdout(), res, func(w io.Writer) error { return bench.WriteTable(w, res) }); err != nil {
					return err
				}
			}
			if runErr != nil {
				return runErr
			}
			return cleanErr
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&endpoint, "endpoint", "e", "", "S3 endpoint: URL or NAME=URL[,access=KEY][,secret=SECRET][,pid=PID[+PID...]][,region=R][,metrics=ADMIN-URL[+ADMIN-URL...]]")
	fs.IntVar(&pid, "server-pid", 0, "pid of a local server to report CPU and peak RSS for")
	wf.register(fs)
	cf.register(fs)
	tf.register(fs)
	of.register(fs)
	return cmd
}

func compareCommand() *cobra.Command {
	var (
		wf        workloadFlags
		of        outputFlags
		tf        terraceFlags
		cf        credentialFlags
		endpoints []string
		rounds    int
		baseline  string
	)
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run one workload against several endpoints in alternation and print ratios",
		Long: `Runs the same workload against two or more S3 endpoints, alternating A B A B
... for --rounds rounds, so that drift in the machine's speed (other load,
thermal limits, caches) falls on every endpoint alike. Prints each endpoint's
totals over all rounds, the round-to-round spread of its ops/s, and ratios
against the baseline (the first endpoint unless --baseline): ops/s and p50
ratios are endpoint ÷ baseline.

Endpoints are given as NAME=URL,access=KEY,secret=SECRET[,pid=PID]; with pid,
the server's CPU per operation and peak RSS are reported too. --start-terrace
adds a local single-node Terrace (appended last, named by --terrace-name).
Each endpoint's objects persist between rounds and are deleted at the end.`,
		Example: `  # A peer anyone can run here: versitygw over a plain directory
  go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
  mkdir -p /tmp/vgw && ROOT_ACCESS_KEY=bench ROOT_SECRET_KEY=benchsecret \
    versitygw --port 127.0.0.1:7070 posix /tmp/vgw &

  # Terrace vs versitygw, 4 KiB PUTs, 3 rounds of 5 s each; ratios are terrace ÷ versitygw
  terrace bench compare --start-terrace \
    --endpoint versitygw=http://127.0.0.1:7070,access=bench,secret=benchsecret,pid=$! \
    --workload put --size 4KiB -c 16 -d 5s --rounds 3

  # Two external endpoints, JSON to a file, baseline chosen by name
  terrace bench compare -e minio=http://127.0.0.1:9000,access=minioadmin,secret=minioadmin \
    -e seaweed=http://127.0.0.1:8333,access=any,secret=any --baseline seaweed \
    --workload get --size 4MiB --warmup 2s --json-file cmp.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := of.validate(cmd); err != nil {
				return err
			}
			opts, err := wf.options(cmd)
			if err != nil {
				return err
			}
			var eps []bench.Endpoint
			for _, spec := range endpoints {
				ep, err := bench.ParseEndpoint(spec, cf.defaults())
				if err != nil {
					return err
				}
				eps = append(eps, ep)
			}
			if len(eps)+boolInt(tf.start) < 2 {
				return errors.New("bench: compare needs at least two endpoints (repeat --endpoint, or add --start-terrace)")
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			if tf.start {
				t, err := tf.startServer(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer func() {
					if err := t.Stop(); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), err)
					}
				}()
				eps = append(eps, t.Endpoint(tf.name))
			}
			pr := of.progress()
			cr, runErr := bench.Compare(ctx, eps, opts, bench.CompareOptions{
				Rounds: rounds, Baseline: baseline,
				OnRun: func(round int, r *bench.Runner) {
					pr.watch(fmt.Sprintf("round %d/%d %s", round+1, max(rounds, 1), r.Endpoint().Name), r)
				},
			})
			pr.close()
			if cr != nil {
				if err := of.emit(cmd.OutOrStdout(), cr, func(w io.Writer) error { return bench.WriteCompareTable(w, cr) }); err != nil {
					return err
				}
			}
			return runErr
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&endpoints, "endpoint", "e", nil, "endpoint NAME=URL,access=KEY,secret=SECRET[,pid=PID[+PID...]][,region=R][,metrics=ADMIN-URL[+...]] (repeat for each)")
	fs.IntVar(&rounds, "rounds", 3, "rounds; each runs every endpoint once, in order")
	fs.StringVar(&baseline, "baseline", "", "endpoint name the ratios are relative to (default: the first)")
	wf.register(fs)
	cf.register(fs)
	tf.register(fs)
	of.register(fs)
	return cmd
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func deviceCommand() *cobra.Command {
	var (
		of   outputFlags
		opts bench.DeviceOptions
		size string
	)
	cmd := &cobra.Command{
		Use:   "device DIR",
		Short: "Measure the device under a directory: sequential and random I/O, fsync rate",
		Long: `Measures the device holding DIR with five tests of --runtime each (about 10 s
in all by default):

  seq-write   1 MiB writes, --queue-depth in flight, flushed at the end
  seq-read    1 MiB reads
  rand-read   4 KiB reads at random offsets
  rand-write  4 KiB writes at random offsets
  fsync       serial 4 KiB write + fsync pairs: the ceiling for a writer that
              syncs every acknowledgement alone (group commit beats it)

Uses fio (libaio, O_DIRECT) when it is on PATH, otherwise a built-in Go test
(positioned reads/writes from --queue-depth goroutines, O_DIRECT). O_DIRECT is
dropped where the filesystem refuses it (tmpfs), and the output says so. Test
files are written in DIR and removed afterwards.`,
		Example: `  # Quick baseline (~10 s) of the disk under the data directory
  terrace bench device /var/lib/terrace

  # Longer and larger, forcing the built-in test, JSON out
  terrace bench device /mnt/nvme --runtime 10s --file-size 2GiB --engine builtin -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := of.validate(cmd); err != nil {
				return err
			}
			n, err := bench.ParseBytes(size)
			if err != nil {
				return err
			}
			opts.FileBytes = n
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			if !of.quiet && stderrIsTerminal() {
				fmt.Fprintf(cmd.ErrOrStderr(), "measuring %s (5 tests of %s)...\n", args[0], opts.Runtime)
			}
			res, err := bench.MeasureDevice(ctx, args[0], opts)
			if err != nil {
				return err
			}
			return of.emit(cmd.OutOrStdout(), res, func(w io.Writer) error { return bench.WriteDeviceTable(w, res) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Engine, "engine", "auto", "auto (fio if installed), fio, or builtin")
	fs.DurationVar(&opts.Runtime, "runtime", 2*time.Second, "length of each of the five tests")
	fs.StringVar(&size, "file-size", "256MiB", "size of the test file")
	fs.IntVar(&opts.QueueDepth, "queue-depth", 16, "I/Os in flight for the throughput and random tests")
	fs.BoolVar(&opts.Buffered, "buffered", false, "go through the page cache instead of O_DIRECT")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the test files")
	of.register(fs)
	return cmd
}
