package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
)

var update = flag.Bool("update", false, "rewrite jetstream/*.json from what the worker creates")

// The JetStream definitions: one file per stream (the buckets' streams
// included, as KV_<bucket>) and per work consumer, in the form
// `nats stream add --config` and `nats consumer add --config` read.
func streamFile(name string) string { return "jetstream/stream." + name + ".json" }

func consumerFile(stream, durable string) string {
	return "jetstream/consumer." + stream + "." + durable + ".json"
}

func bucketStream(bucket string) string { return "KV_" + bucket }

// allStreams are the streams a worker creates at start (cmd/worker with
// its default flags): the protocol's, the buckets' (KV_<bucket>), and the
// tool categories'.
func allStreams(topo bus.Topology) []string {
	var names []string
	for _, s := range topo.Streams() {
		names = append(names, s.Name)
	}
	for _, b := range topo.Buckets() {
		names = append(names, bucketStream(b.Bucket))
	}
	names = append(names, categoryStreams...)
	for _, b := range categoryBuckets {
		names = append(names, bucketStream(b))
	}
	return names
}

// allConsumers are the durable consumers a worker creates, by stream.
func allConsumers(topo bus.Topology) map[string]string {
	out := map[string]string{}
	for stream, c := range topo.Consumers() {
		out[stream] = c.Durable
	}
	maps.Copy(out, categoryConsumers)
	return out
}

// definitionFiles are the files for all of them.
func definitionFiles(topo bus.Topology) []string {
	var files []string
	for _, s := range allStreams(topo) {
		files = append(files, streamFile(s))
	}
	for stream, durable := range allConsumers(topo) {
		files = append(files, consumerFile(stream, durable))
	}
	slices.Sort(files)
	return files
}

// TestJetStreamDefinitionsMatchTopology compares the definition files of
// the protocol's streams, consumers and buckets with what
// bus.Topology{}.WithDefaults() (the worker's defaults) says, field by
// field, and fails with the differences when they drift; the tool
// categories' files are checked against the server by the provisioning
// tests. With -update it first rewrites every file from what the worker
// creates on a fresh server.
func TestJetStreamDefinitionsMatchTopology(t *testing.T) {
	topo := bus.Topology{}.WithDefaults()
	if *update {
		writeDefinitions(t, topo)
	}
	have, _ := filepath.Glob("jetstream/*.json")
	if want := definitionFiles(topo); !slices.Equal(have, want) {
		t.Errorf("jetstream/ holds %v, want %v (go test ./deployments -run TestJetStreamDefinitions -update rewrites them)", have, want)
	}
	for _, want := range topo.Streams() {
		got := readStreamFile(t, streamFile(want.Name))
		reportDiffs(t, streamFile(want.Name), streamDiffs(want, got))
	}
	for stream, want := range topo.Consumers() {
		got := readConsumerFile(t, consumerFile(stream, want.Durable))
		reportDiffs(t, consumerFile(stream, want.Durable), consumerDiffs(want, got))
	}
	for _, b := range topo.Buckets() {
		file := streamFile(bucketStream(b.Bucket))
		got := readStreamFile(t, file)
		want := jetstream.StreamConfig{
			Name: bucketStream(b.Bucket), Description: b.Description, Subjects: []string{"$KV." + b.Bucket + ".>"},
			Retention: jetstream.LimitsPolicy, Storage: b.Storage, Replicas: b.Replicas, MaxAge: b.TTL,
			MaxMsgsPerSubject: int64(b.History), MaxMsgSize: -1, Discard: jetstream.DiscardNew,
			// What makes a stream a bucket for the clients.
			AllowRollup: true, DenyDelete: true, AllowDirect: true,
			Duplicates: got.Duplicates, // the client's choice: min(2m, TTL); checked against the server below
		}
		reportDiffs(t, file, streamDiffs(want, got))
	}
}

// TestJetStreamDefinitionsProvision creates every stream and consumer from
// the files on a fresh server (configured with nats/single.conf), as an
// operator provisioning ahead of the fleet would, then runs the worker's
// set-up with the worker user: it must accept them and change nothing.
func TestJetStreamDefinitionsProvision(t *testing.T) {
	t.Parallel() // its own servers; the run's passwords (sharedPasswords)
	pw := sharedPasswords()
	srv, _ := startServer(t, loadConfig(t, "nats/single.conf"))
	admin := connect(t, srv.ClientURL(), "admin", pw.admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo := bus.Topology{}.WithDefaults()
	for _, name := range allStreams(topo) {
		if _, err := admin.js.CreateStream(ctx, readStreamFile(t, streamFile(name))); err != nil {
			t.Fatalf("creating the stream of %s: %v", streamFile(name), err)
		}
	}
	for stream, durable := range allConsumers(topo) {
		if _, err := admin.js.CreateConsumer(ctx, stream, readConsumerFile(t, consumerFile(stream, durable))); err != nil {
			t.Fatalf("creating consumer %s: %v", durable, err)
		}
	}
	checkSetupChangesNothing(t, ctx, srv.ClientURL(), pw, topo)
}

// TestJetStreamDefinitionsWithNATSCLI does the same with the NATS CLI:
// `nats stream add --config` and `nats consumer add --config` on every
// file. It is skipped when nats is not installed.
func TestJetStreamDefinitionsWithNATSCLI(t *testing.T) {
	t.Parallel() // its own servers; the run's passwords (sharedPasswords)
	cli := natsCLI(t)
	pw := sharedPasswords()
	srv, _ := startServer(t, loadConfig(t, "nats/single.conf"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo := bus.Topology{}.WithDefaults()
	run := func(args ...string) {
		t.Helper()
		args = append([]string{"--server", srv.ClientURL(), "--user", "admin", "--password", pw.admin, "--no-context"}, args...)
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args[7:], " "), err, out)
		}
	}
	for _, name := range allStreams(topo) {
		run("stream", "add", "--config", streamFile(name))
	}
	for stream, durable := range allConsumers(topo) {
		run("consumer", "add", stream, "--config", consumerFile(stream, durable))
	}
	checkSetupChangesNothing(t, ctx, srv.ClientURL(), pw, topo)
}

// natsCLI finds the NATS CLI on PATH or in GOPATH/bin, or skips the test.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "nats")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("needs the NATS CLI (nats) on PATH or in GOPATH/bin: scripts/test-deps.sh installs it (go install github.com/nats-io/natscli/nats@v0.5.0)")
	return ""
}

// checkSetupChangesNothing runs the worker's set-up (the categories' and
// bus.Setup, as cmd/worker does) as the worker user against provisioned
// streams and consumers, and checks that it succeeds and leaves their
// configurations as they were.
func checkSetupChangesNothing(t *testing.T, ctx context.Context, url string, pw passwords, topo bus.Topology) {
	t.Helper()
	wk := connect(t, url, "worker", pw.worker)
	before := snapshot(t, ctx, wk.js, topo)
	if err := setupAll(ctx, wk.js, topo); err != nil {
		t.Fatalf("the worker's set-up on the provisioned server: %v", err)
	}
	after := snapshot(t, ctx, wk.js, topo)
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if !bytes.Equal(before[name], after[name]) {
			t.Errorf("bus.Setup changed %s:\nprovisioned: %s\nafter:       %s", name, before[name], after[name])
		}
	}
	wk.noErrors(t)
}

// snapshot returns every stream and consumer configuration of the
// topology as the server holds it, as JSON without the server's metadata.
func snapshot(t *testing.T, ctx context.Context, js jetstream.JetStream, topo bus.Topology) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range allStreams(topo) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := s.CachedInfo().Config
		cfg.Metadata = nil
		out["stream "+name], _ = json.Marshal(cfg)
	}
	for stream, durable := range allConsumers(topo) {
		cons, err := js.Consumer(ctx, stream, durable)
		if err != nil {
			t.Fatalf("consumer %s > %s: %v", stream, durable, err)
		}
		cfg := cons.CachedInfo().Config
		cfg.Metadata = nil
		out["consumer "+stream+" > "+durable], _ = json.Marshal(cfg)
	}
	return out
}

// writeDefinitions writes the files from what the worker's set-up creates
// on a fresh server, as the server reports them (its defaults filled in),
// without the server's metadata.
func writeDefinitions(t *testing.T, topo bus.Topology) {
	t.Helper()
	js := natstest.Start(t).JetStream(t)
	ctx := context.Background()
	if err := setupAll(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob("jetstream/*.json")
	for _, f := range old {
		_ = os.Remove(f)
	}
	write := func(file string, v any) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range allStreams(topo) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Metadata = nil
		write(streamFile(name), cfg)
	}
	for stream, durable := range allConsumers(topo) {
		cons, err := js.Consumer(ctx, stream, durable)
		if err != nil {
			t.Fatal(err)
		}
		cfg := cons.CachedInfo().Config
		cfg.Metadata = nil
		write(consumerFile(stream, durable), cfg)
	}
}

// readStreamFile decodes a stream definition strictly: a field the client
// library does not know is an error.
func readStreamFile(t *testing.T, file string) jetstream.StreamConfig {
	t.Helper()
	var cfg jetstream.StreamConfig
	decodeStrict(t, file, &cfg)
	return cfg
}

func readConsumerFile(t *testing.T, file string) jetstream.ConsumerConfig {
	t.Helper()
	var cfg jetstream.ConsumerConfig
	decodeStrict(t, file, &cfg)
	return cfg
}

func decodeStrict(t *testing.T, file string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(readFile(t, file)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// reportDiffs fails the test with every difference of one file.
func reportDiffs(t *testing.T, file string, diffs []string) {
	t.Helper()
	if len(diffs) > 0 {
		t.Errorf("%s differs from what the worker creates (go test ./deployments -run TestJetStreamDefinitions -update rewrites it):\n  %s",
			file, strings.Join(diffs, "\n  "))
	}
}

type field struct {
	name       string
	want, have any
}

func diffFields(fields []field) []string {
	var out []string
	for _, f := range fields {
		w, h := fmt.Sprint(f.want), fmt.Sprint(f.have)
		if w != h {
			out = append(out, fmt.Sprintf("%s: the file has %s, the worker creates %s", f.name, h, w))
		}
	}
	return out
}

// unlimited reads 0 and -1 alike: the server stores "no limit" as -1.
func unlimited[T int | int32 | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// streamDiffs compares what matters of a stream configuration.
func streamDiffs(want, have jetstream.StreamConfig) []string {
	return diffFields([]field{
		{"name", want.Name, have.Name},
		{"description", want.Description, have.Description},
		{"subjects", want.Subjects, have.Subjects},
		{"retention", want.Retention, have.Retention},
		{"storage", want.Storage, have.Storage},
		{"num_replicas", want.Replicas, have.Replicas},
		{"max_age", want.MaxAge, have.MaxAge},
		{"duplicate_window", want.Duplicates, have.Duplicates},
		{"max_msg_size", unlimited(want.MaxMsgSize), unlimited(have.MaxMsgSize)},
		{"max_msgs", unlimited(want.MaxMsgs), unlimited(have.MaxMsgs)},
		{"max_bytes", unlimited(want.MaxBytes), unlimited(have.MaxBytes)},
		{"max_msgs_per_subject", unlimited(want.MaxMsgsPerSubject), unlimited(have.MaxMsgsPerSubject)},
		{"max_consumers", unlimited(want.MaxConsumers), unlimited(have.MaxConsumers)},
		{"discard", want.Discard, have.Discard},
		{"allow_rollup_hdrs", want.AllowRollup, have.AllowRollup},
		{"deny_delete", want.DenyDelete, have.DenyDelete},
		{"deny_purge", want.DenyPurge, have.DenyPurge},
		{"allow_direct", want.AllowDirect, have.AllowDirect},
		{"sealed", want.Sealed, have.Sealed},
		{"no_ack", want.NoAck, have.NoAck},
	})
}

// consumerDiffs compares what matters of a work consumer.
func consumerDiffs(want, have jetstream.ConsumerConfig) []string {
	return diffFields([]field{
		{"durable_name", want.Durable, have.Durable},
		{"ack_policy", want.AckPolicy, have.AckPolicy},
		{"deliver_policy", want.DeliverPolicy, have.DeliverPolicy},
		{"ack_wait", want.AckWait, have.AckWait},
		{"max_deliver", want.MaxDeliver, have.MaxDeliver},
		{"max_ack_pending", want.MaxAckPending, have.MaxAckPending},
		{"num_replicas", want.Replicas, have.Replicas},
		{"mem_storage", want.MemoryStorage, have.MemoryStorage},
		{"filter_subject", want.FilterSubject, have.FilterSubject},
		{"filter_subjects", len(want.FilterSubjects), len(have.FilterSubjects)},
		{"deliver_subject (a pull consumer has none)", want.DeliverSubject, have.DeliverSubject},
		{"backoff", want.BackOff, have.BackOff},
	})
}
